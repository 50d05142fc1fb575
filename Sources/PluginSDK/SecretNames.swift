/// How names that carry secrets are matched: the query parameters and body fields the logger
/// redacts, and the query parameters the host keeps out of its error messages. One matcher, so a
/// name hidden in one place is hidden in the other.
package enum SecretNames {
    /// `name` in lower case without `_` and `-`: `access_token`, `accessToken` and `Access-Token`
    /// are one name.
    package static func normalized(_ name: String) -> String {
        String(name.lowercased().unicodeScalars.filter { $0 != "_" && $0 != "-" })
    }

    /// Whether the field `name` is one of `names` (normalized): the whole name, or its last one
    /// or two words (`new_password`, `currentPassword`, `AuthenticationResult`'s `IdToken`), or,
    /// for a form's nested name, its last bracketed part (`user[password]`, `user[password2]`);
    /// a list's elements are named as the list (`password[]`, `token[0]`).
    package static func matches(_ name: String, _ names: Set<String>) -> Bool {
        var name = Substring(name)
        while name.hasSuffix("]"), let open = name.lastIndex(of: "["),
            name[name.index(after: open)..<name.index(before: name.endIndex)].allSatisfy({ $0.isASCII && $0.isNumber })
        {
            name = name[..<open]
        }
        if names.contains(unnumbered(normalized(String(name)))) { return true }
        if name.hasSuffix("]"), let open = name.lastIndex(of: "[") {
            name = name[name.index(after: open)..<name.index(before: name.endIndex)]
            if names.contains(unnumbered(normalized(String(name)))) { return true }
        }
        // Words: split at `_`, `-`, `.`, and where a lower-case letter or digit meets an upper-case one.
        var words: [String] = []
        var word = ""
        var previousIsLowerOrDigit = false
        let characters = Array(name)
        for (position, character) in characters.enumerated() {
            let next = position + 1 < characters.count ? characters[position + 1] : nil
            if character == "_" || character == "-" || character == "." {
                if !word.isEmpty { words.append(word) }
                word = ""
                previousIsLowerOrDigit = false
                continue
            }
            // A new word at a capital after a lower-case letter or digit (`dbPassword`), and at
            // the last capital of a run when a lower-case letter follows (`DB|Password`, `XApi|Key`).
            let endsRun = character.isUppercase && word.last?.isUppercase == true && next?.isLowercase == true
            if character.isUppercase && (previousIsLowerOrDigit || endsRun), !word.isEmpty {
                words.append(word)
                word = ""
            }
            word.append(character)
            previousIsLowerOrDigit = character.isLowercase || character.isNumber
        }
        if !word.isEmpty { words.append(word) }
        guard words.count > 1 else { return false }
        let last = unnumbered(normalized(words[words.count - 1]))
        if names.contains(last) || names.contains(normalized(words[words.count - 2]) + last) { return true }
        // A word that names nothing but a secret, wherever it stands (`SecretAccessKey`, `secret_key`,
        // `password_hash`), when it is one of `names`.
        return words.contains { word in
            let word = unnumbered(normalized(word))
            return secretWords.contains(word) && names.contains(word)
        }
    }

    /// The words that make any field name they are part of a secret's, when they are redacted.
    package static let secretWords: Set<String> = ["password", "passwd", "secret"]

    /// `name` without the digits it ends with: `password1` and `password2` (a sign-up form's
    /// repeat) are `password`.
    package static func unnumbered(_ name: String) -> String {
        let trimmed = name.reversed().drop { $0.isASCII && $0.isNumber }
        return trimmed.isEmpty ? name : String(trimmed.reversed())
    }
}
