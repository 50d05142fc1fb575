import Foundation

/// The answer for the last input asked, kept so that the same input asked again (an app's
/// requests repeat a few URLs, secrets, credentials and header values) is answered without
/// computing it again. Thread-safe; the input is compared where it is kept, under the lock (no
/// copy of it made to compare), and the answer is computed outside the lock.
///
/// A `String` input is the same only as the same UTF-8 bytes (`==` holds canonically equivalent
/// strings equal, `"é"` and `"e\u{301}"`, but the bytes are what is sent, signed or hashed);
/// an input made of strings should compare them so too (``UTF8Bytes/equal(_:_:)``).
///
/// ```swift
/// let keys = LastAnswer<String, HMACSHA256.Key>()
/// let key = keys.answer(for: secret) { HMACSHA256.Key(Array($0.utf8)) }
/// ```
///
/// Inlinable, like ``PerRequestState``: a plugin's calls are specialised for its own types
/// (generic code across the module boundary looks up type metadata on every call).
public final class LastAnswer<Input: Equatable, Answer> {
    @usableFromInline let last = Locked<(input: Input, answer: Answer)?>(nil)

    /// An empty memory.
    public init() {}

    /// The answer for `input`: the kept one when `input` equals the last input asked, else
    /// `compute(input)`, which is then kept in its place.
    @inlinable
    public func answer(for input: Input, _ compute: (Input) -> Answer) -> Answer {
        if let kept = last.withLock({ $0 != nil && Self.same($0!.input, input) ? $0!.answer : nil }) { return kept }
        let computed = compute(input)
        last.withLock { $0 = (input, computed) }
        return computed
    }

    /// Whether two inputs are the same: strings byte for byte, other inputs by `==`.
    @inlinable
    static func same(_ a: Input, _ b: Input) -> Bool {
        // Specialised for the plugin's own input type, the cast is decided at compile time.
        if let a = a as? String, let b = b as? String { return UTF8Bytes.equal(a, b) }
        return a == b
    }
}

/// Byte-for-byte equality of strings.
public enum UTF8Bytes {
    /// Whether `a` and `b` are the same UTF-8 bytes (`==` also holds canonically equivalent
    /// strings equal).
    @inlinable
    public static func equal(_ a: String, _ b: String) -> Bool {
        let count = a.utf8.count
        guard b.utf8.count == count else { return false }
        let same = a.utf8.withContiguousStorageIfAvailable { x in
            b.utf8.withContiguousStorageIfAvailable { y in count == 0 || memcmp(x.baseAddress!, y.baseAddress!, count) == 0 }
        }
        if case .some(.some(let result)) = same { return result }
        return a.utf8.elementsEqual(b.utf8)
    }

    /// Whether `text`'s UTF-8 is `bytes`, byte for byte (`memcmp` for a native string).
    package static func equal(_ text: String, _ bytes: UnsafeRawBufferPointer) -> Bool {
        guard text.utf8.count == bytes.count else { return false }
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return true }
        let same = text.utf8.withContiguousStorageIfAvailable { memcmp($0.baseAddress!, base, bytes.count) == 0 }
        return same ?? text.utf8.elementsEqual(bytes)
    }

    /// Whether `a` and `b` hold the same keys and values, byte for byte (each key of `a` is found
    /// in `b` as an equal string, then both keys and values compared as bytes; as many keys: one
    /// to one).
    package static func equal(_ a: [String: String], _ b: [String: String]) -> Bool {
        guard a.count == b.count else { return false }
        for (key, value) in a {
            guard let index = b.index(forKey: key), equal(b[index].key, key), equal(b[index].value, value) else { return false }
        }
        return true
    }
}

// Safe: the kept pair is only touched under its lock, and crosses threads only when Sendable.
extension LastAnswer: @unchecked Sendable where Input: Sendable, Answer: Sendable {}
