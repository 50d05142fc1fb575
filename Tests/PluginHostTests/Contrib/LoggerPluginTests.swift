import Foundation
import PluginHost
import PluginSDK
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("logger plugin (loaded from its bundle)")
struct LoggerPluginTests {
    func log(_ f: PluginFixtures) -> String { (try? String(contentsOfFile: f.root + "/requests.log", encoding: .utf8)) ?? "" }

    @Test func basicLinesToAFileCreatedWithMode0600() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("logger", ["level": "basic", "output": "file", "file": f.root + "/requests.log"])])
        _ = try await provider.request(try Bin("get")).value
        _ = await provider.request(try Bin("get", base: closedPortURL())).result
        var info = stat()
        #expect(stat(f.root + "/requests.log", &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
        let lines = log(f).split(separator: "\n").map(String.init)
        let base = try TestServer.url().absoluteString
        #expect(lines.count == 4)
        #expect(lines[0].hasPrefix("→ GET \(base)/get #"))
        #expect(lines[1].range(of: #"^← 200 get #\d+ \(\d+\.\d ms, \d+ bytes\)$"#, options: .regularExpression) != nil)
        #expect(lines[3].range(of: #"^← failed cannotConnect get #\d+ \(\d+\.\d ms\): "#, options: .regularExpression) != nil)
    }

    @Test func headersAreRedactedAndCURLIsRendered() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([
            (
                "logger",
                [
                    "level": "headers", "output": "file", "file": f.root + "/requests.log", "curl": true,
                    "redactHeaders": ["X-Api-Key"], "redactQuery": ["token", "Set-Cookie"],
                ]
            )
        ])
        _ = try await provider.request(
            try Bin(
                "response-headers",
                task: .requestParameters(parameters: ["token": "q-secret-1", "Set-Cookie": "sid=s-secret-2"], encoding: URLEncoding.default),
                headers: ["Authorization": "Bearer h-secret-3", "X-Api-Key": "k-secret-4", "Cookie": "c=c-secret-5", "X-Plain": "visible"])
        ).value
        let text = log(f)
        for secret in ["q-secret-1", "s-secret-2", "h-secret-3", "k-secret-4", "c-secret-5"] {
            #expect(!text.contains(secret), "\(secret) leaked into the log")
        }
        #expect(text.contains("  Authorization: <redacted>"))
        #expect(text.contains("  X-Api-Key: <redacted>"))
        #expect(text.contains("  X-Plain: visible"))
        #expect(text.contains("  Set-Cookie: <redacted>"))
        #expect(text.contains("token=<redacted>"))
        #expect(text.contains("-H 'Authorization: <redacted>'"))
        #expect(text.contains("curl -X GET"))
    }

    @Test func bodiesAreTruncatedAndBinaryBodiesShowOnlyTheirSize() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("logger", ["level": "body", "output": "file", "file": f.root + "/requests.log", "maxBodyBytes": 64])])
        _ = try await provider.request(
            try Bin(
                "anything", method: .post, task: .requestData(Data(String(repeating: "x", count: 500).utf8)),
                headers: ["Content-Type": "text/plain"])
        ).value
        _ = try await provider.request(try Bin("bytes/300")).value
        let text = log(f)
        #expect(text.contains(String(repeating: "x", count: 64) + "… (truncated, 500 bytes in all)"))
        #expect(!text.contains(String(repeating: "x", count: 65)))
        #expect(text.contains("<300 bytes, not UTF-8>"))
    }

    @Test func secretsNeverAppearEvenInEchoedBodies() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([
            ("access-token", [:]), ("signature", [:]),
            ("logger", ["level": "body", "output": "file", "file": f.root + "/requests.log", "curl": true, "maxBodyBytes": 100_000]),
        ])
        let token = "tok-" + UUID().uuidString
        let secret = "sig-" + UUID().uuidString
        provider.services.setValue(token, forKey: "access_token")
        provider.services.setValue(secret, forKey: "signing_secret")
        for _ in 0..<3 {
            _ = try await provider.request(
                try Bin("anything", method: .post, task: .requestParameters(parameters: ["note": "hello"], encoding: JSONEncoding.default))
            ).value
        }
        let text = log(f)
        #expect(text.contains("\"note\""))
        #expect(!text.contains(token))
        #expect(!text.contains(secret))
        #expect(text.contains("<redacted>"))
    }

    /// A store secret with characters a URL escapes (`+`, `/`, `=`: an opaque base64 token) is
    /// scrubbed in the percent-encoded form the URL and a form body carry it in, under a name the
    /// logger does not redact: it was scrubbed only as it is, which the URL never holds.
    @Test func aStoreSecretIsScrubbedPercentEncodedToo() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([
            ("logger", ["level": "body", "output": "file", "file": f.root + "/requests.log", "curl": true, "maxBodyBytes": 100_000])
        ])
        let suffix = String(UUID().uuidString.prefix(8))
        let token = "tok+en/Se cret=" + suffix
        provider.services.setValue(token, forKey: "access_token")
        _ = try await provider.request(
            try Bin("anything", task: .requestParameters(parameters: ["session": token], encoding: URLEncoding.queryString))
        ).value
        _ = try await provider.request(
            try Bin(
                "anything", method: .post,
                task: .requestData(Data("a=1&session=tok%2ben%2fSe+cret%3d\(suffix)".utf8)),
                headers: ["Content-Type": "application/x-www-form-urlencoded"])
        ).value
        let text = log(f)
        let escaped = RFC3986.escape(token)
        // httpbin's echo of the URL encodes it its own way again: `tok%2Ben/Se%20cret%3D…`.
        for form in [token, escaped, "tok%2ben%2fSe+cret%3d", "tok%2Ben/Se%20cret%3D", suffix] {
            #expect(!text.contains(form), "\(form) leaked into the log")
        }
        #expect(text.contains("session=<redacted>"), "\(text)")
    }

    /// A shared access signature's `sig` (Azure's SAS URLs) is redacted by default: it is the
    /// credential of the URL, and was printed.
    @Test func aSharedAccessSignatureIsRedactedByDefault() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("logger", ["level": "basic", "output": "file", "file": f.root + "/requests.log"])])
        let signature = "sas" + String(UUID().uuidString.prefix(12))
        _ = try await provider.request(
            try Bin("get", task: .requestParameters(parameters: ["sv": "2020-08-04", "sig": signature], encoding: URLEncoding.queryString))
        ).value
        let text = log(f)
        #expect(!text.contains(signature))
        #expect(text.contains("sig=<redacted>"), "\(text)")
        #expect(text.contains("sv=2020-08-04"))
    }

    /// ROT13, as `/fixture/respond?rot13=1` reads its body and fields: the request carries no
    /// secret the response then shows.
    static func rot13(_ text: String) -> String {
        String(
            text.unicodeScalars.map { scalar -> Character in
                switch scalar {
                case "a"..."z": Character(UnicodeScalar((scalar.value - 97 + 13) % 26 + 97)!)
                case "A"..."Z": Character(UnicodeScalar((scalar.value - 65 + 13) % 26 + 65)!)
                default: Character(scalar)
                }
            })
    }

    /// The password in a URL (`user:password@host`, which libcurl sends as Basic) is a secret as
    /// the `Authorization` field is: redacted in the URL and the cURL form, and scrubbed from
    /// the rest, its Basic form included (httpbin echoes the field). It used to be logged as is.
    @Test func aPasswordInTheURLNeverReachesTheLog() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([
            ("logger", ["level": "body", "output": "file", "file": f.root + "/requests.log", "curl": true, "maxBodyBytes": 100_000])
        ])
        var withUser = try #require(URLComponents(url: try TestServer.url(), resolvingAgainstBaseURL: false))
        withUser.user = "user"
        withUser.password = "pw-secret-5"
        let response = try await provider.request(try Bin("anything", base: try #require(withUser.url))).value
        let echoed = try #require(try response.mapJSON()["headers"]?["Authorization"]?.stringValue)
        #expect(echoed == "Basic " + Data("user:pw-secret-5".utf8).base64EncodedString())
        let text = log(f)
        #expect(!text.contains("pw-secret-5"))
        #expect(!text.contains(Data("user:pw-secret-5".utf8).base64EncodedString()))
        #expect(text.contains("//user:<redacted>@"))
        // A password may hold a colon: everything after the first is the password.
        let port = try #require(try TestServer.url().port)
        let colon = try #require(URL(string: "http://bob:s3:cr3t-pw-8@127.0.0.1:\(port)"))
        _ = try await provider.request(try Bin("get", base: colon)).value
        let again = log(f)
        #expect(!again.contains("cr3t-pw-8"))
        #expect(!again.contains("s3:"))
        #expect(again.contains("//bob:<redacted>@"))
    }

    /// The response side is redacted as the request side: a `Location` whose query or fragment
    /// names a redacted parameter, and a `Set-Cookie` value echoed in the body; and so is a
    /// `Cookie` value the server echoes back. They used to be printed as they came.
    @Test func responseFieldsAndEchoedCookiesAreRedacted() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([
            ("logger", ["level": "body", "output": "file", "file": f.root + "/requests.log", "maxBodyBytes": 100_000])
        ])
        let location = "https://app.test/cb?state=1&access_token=loc-secret-1#token=frag-secret-3"
        let response = try await provider.request(
            try Bin(
                "fixture/respond",
                task: .requestParameters(
                    parameters: [
                        "rot13": "1", "h_Location": Self.rot13(location), "h_Set-Cookie": Self.rot13("sid=sc-secret-2; Path=/"),
                        "body": Self.rot13(#"{"sid":"sc-secret-2"}"#),
                    ], encoding: URLEncoding.queryString))
        ).value
        #expect(response.value(forHTTPHeaderField: "Location") == location)
        _ = try await provider.request(try Bin("cookies", headers: ["Cookie": "session=ck-secret-4; theme=dark"])).value
        // A fragment that holds a route and its own query (a single-page app's callback).
        let route = "https://app.test/#/callback?state=2&access_token=route-secret-6"
        _ = try await provider.request(
            try Bin(
                "fixture/respond",
                task: .requestParameters(parameters: ["rot13": "1", "h_Content-Location": Self.rot13(route)], encoding: URLEncoding.queryString))
        ).value
        let text = log(f)
        for secret in ["loc-secret-1", "sc-secret-2", "frag-secret-3", "ck-secret-4", "route-secret-6"] {
            #expect(!text.contains(secret), "\(secret) leaked into the log")
        }
        #expect(text.contains("  Location: https://app.test/cb?state=1&access_token=<redacted>#token=<redacted>"))
        #expect(text.contains(#"  {"sid":"<redacted>"}"#))
        #expect(text.contains(#""session": "<redacted>""#), "a Cookie field's values")
        #expect(text.contains(#""theme": "dark""#), "a value of under 8 characters is a preference, not scrubbed everywhere")
        #expect(text.contains("  Content-Location: https://app.test/#/callback?state=2&access_token=<redacted>"))
    }

    /// A secret a server echoes in JSON is scrubbed as JSON writes it too: a quoted cookie value
    /// (`sid="…"`, which JSON writes `sid=\"…\"`), a Digest answer's quoted fields, a quoted
    /// `Set-Cookie` value repeated in the body. They were scrubbed only as the field wrote them.
    @Test func secretsEchoedAsJSONWritesThemAreScrubbed() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let services = PluginServices()
        // A token with a quote and a letter outside ASCII, echoed as Node, Go or Foundation write
        // JSON (the quote escaped, the letter as it is).
        services.setValue(#"tök"en-secret-7"#, forKey: "access_token")
        let provider = try f.provider(
            [("logger", ["level": "body", "output": "file", "file": f.root + "/requests.log", "maxBodyBytes": 100_000])], services: services)
        let sent: [String: String] = ["Cookie": #"sid="q-secret-12345""#, "Authorization": #"Digest username="ann", response="d-secret-hash-5""#]
        let echoed = try await provider.request(try Bin("anything", headers: sent)).value
        #expect(String(decoding: echoed.data, as: UTF8.self).contains(#"sid=\"q-secret-12345\""#))
        // httpbin's /cookies echoes each value without its quotes.
        _ = try await provider.request(try Bin("cookies", headers: ["Cookie": #"sid="q-secret-12345"; pref="darker""#])).value
        _ = try await provider.request(
            try Bin(
                "fixture/respond",
                task: .requestParameters(
                    parameters: [
                        "rot13": "1", "h_Set-Cookie": Self.rot13(#"sid="rs-secret-1234"; Path=/"#),
                        "body": Self.rot13(#"{"echo": "sid=\"rs-secret-1234\"", "t": "tök\"en-secret-7"}"#),
                    ], encoding: URLEncoding.queryString))
        ).value
        let text = log(f)
        for secret in ["q-secret-12345", "d-secret-hash-5", "rs-secret-1234", "en-secret-7"] {
            #expect(!text.contains(secret), "\(secret) leaked into the log")
        }
        // A value of under 8 characters without its quotes is a preference, not scrubbed everywhere.
        #expect(text.contains(#""pref": "darker""#), "\(text)")
        #expect(text.contains("  Cookie: <redacted>") && text.contains("  Set-Cookie: <redacted>"), "\(text)")
    }

    /// Query parameters are matched as body fields are: `accessToken` is `access_token`, and an AWS
    /// presigned URL's `X-Amz-Signature` and `X-Amz-Security-Token` end with `signature` and `token`
    /// (each was matched by its exact lower-case name, and printed in clear with the defaults).
    @Test func queryNamesAreMatchedAsFieldNamesAre() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("logger", ["level": "basic", "output": "file", "file": f.root + "/requests.log"])])
        let parameters: Parameters = ["accessToken": "q-tok-1", "X-Amz-Signature": "q-sig-2", "X-Amz-Security-Token": "q-sts-3", "page": "3"]
        _ = try await provider.request(try Bin("get", task: .requestParameters(parameters: parameters, encoding: URLEncoding.queryString))).value
        let text = log(f)
        for secret in ["q-tok-1", "q-sig-2", "q-sts-3"] { #expect(!text.contains(secret), "\(secret) leaked into the log: \(text)") }
        for shown in ["accessToken=<redacted>", "X-Amz-Signature=<redacted>", "X-Amz-Security-Token=<redacted>", "page=3"] {
            #expect(text.contains(shown), "\(text)")
        }
    }

    /// Found by a review, each leaked into the log: a user without a password in the URL (an API
    /// key, as `https://key@api…` or `https://key:@api…` send it), and its Basic form echoed; a
    /// `Location`'s redacted parameter repeated in the body; the start of a secret a body's cut at
    /// `maxBodyBytes` left (scrubbing replaces whole secrets only).
    @Test func userOnlyURLsLocationsInBodiesAndCutSecrets() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("logger", ["level": "body", "output": "file", "file": f.root + "/requests.log", "curl": true])])
        for password in [nil, ""] {
            var withKey = try #require(URLComponents(url: try TestServer.url(), resolvingAgainstBaseURL: false))
            withKey.user = "key-secret-7"
            withKey.password = password
            let response = try await provider.request(try Bin("anything", base: try #require(withKey.url))).value
            let echoed = try #require(try response.mapJSON()["headers"]?["Authorization"]?.stringValue)
            #expect(echoed == "Basic " + Data("key-secret-7:".utf8).base64EncodedString())
        }
        let location = "myapp://cb#access_token=loc-secret-9"
        _ = try await provider.request(
            try Bin(
                "fixture/respond",
                task: .requestParameters(
                    parameters: [
                        "rot13": "1", "status": "302", "type": "text/html", "h_Location": Self.rot13(location),
                        "body": Self.rot13("Redirecting to " + location),
                    ], encoding: URLEncoding.queryString))
        ).value
        let token = "tok-0123456789abcdef"
        let cut = try f.provider([("logger", ["level": "body", "output": "file", "file": f.root + "/cut.log", "maxBodyBytes": 15])])
        cut.services.setValue(token, forKey: "access_token")
        _ = try await cut.request(
            try Bin(
                "fixture/respond",
                task: .requestParameters(parameters: ["body": "xxxx " + token, "type": "text/plain"], encoding: URLEncoding.queryString))
        ).value
        let text = log(f)
        for secret in ["key-secret-7", Data("key-secret-7:".utf8).base64EncodedString(), "loc-secret-9"] {
            #expect(!text.contains(secret), "\(secret) leaked into the log")
        }
        #expect(text.contains("//<redacted>@127.0.0.1"))
        #expect(text.contains("  Location: myapp://cb#access_token=<redacted>"))
        #expect(text.contains("  Redirecting to myapp://cb#access_token=<redacted>"))
        let cutText = (try? String(contentsOfFile: f.root + "/cut.log", encoding: .utf8)) ?? ""
        #expect(!cutText.contains("tok-0"), "\(cutText)")
        #expect(cutText.contains("  xxxx <redacted>… (truncated, 25 bytes in all)"), "\(cutText)")
    }

    /// Field names as cloud and sign-up APIs spell them: the secret word first (`SecretAccessKey`,
    /// `secret_key`), numbered (`password1`, `password2`), `private_key`; each printed in full.
    /// Words that only contain a secret word (`secretary`) and `token_type` stay.
    @Test func secretWordsAnywhereInANameAndNumberedNames() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([
            ("logger", ["level": "body", "output": "file", "file": f.root + "/requests.log", "maxBodyBytes": 100_000])
        ])
        let json =
            #"{"AccessKeyId": "AK", "SecretAccessKey": "sk-12345678", "secret_key": "sk2-12345678", "private_key": "pk-12345678", "#
            + #""secretary": "Ann", "token_type": "Bearer"}"#
        _ = try await provider.request(
            try Bin("anything", method: .post, task: .requestData(Data(json.utf8)), headers: ["Content-Type": "application/json"])
        ).value
        let form = "username=ann&password1=pw-12345678&new_password2=pw2-12345678"
        _ = try await provider.request(
            try Bin("anything", method: .post, task: .requestData(Data(form.utf8)), headers: ["Content-Type": "application/x-www-form-urlencoded"])
        ).value
        let text = log(f)
        for secret in ["sk-12345678", "sk2-12345678", "pk-12345678", "pw-12345678", "pw2-12345678"] {
            #expect(!text.contains(secret), "\(secret) leaked into the log")
        }
        #expect(text.contains(#""AccessKeyId": "AK""#) && text.contains(#""secretary": "Ann""#) && text.contains(#""token_type": "Bearer""#))
        // An array or an object under a secret's name is the secret's, and so are its strings.
        let composite = #"{"password": ["pa-12345678"], "secret": {"old": "so-12345678", "new": [1, "sn-12345678"]}, "user": "ann"}"#
        _ = try await provider.request(
            try Bin("anything", method: .post, task: .requestData(Data(composite.utf8)), headers: ["Content-Type": "application/json"])
        ).value
        let again = log(f)
        for secret in ["pa-12345678", "so-12345678", "sn-12345678"] {
            #expect(!again.contains(secret), "\(secret) leaked into the log")
        }
        #expect(again.contains("\n  " + #"{"password": "<redacted>", "secret": "<redacted>", "user": "ann"}"# + "\n"))
        // httpbin's echo of the body as a string (`data`) is redacted as the body is (its copy of
        // the secret's object whole; the names in it are no secrets: `secretsInsideJSONStringsAreRedacted` shows them kept).
        #expect(again.contains(#""data": "{\"password\": \"<redacted>\", \"secret\": \"<redacted>\", \"user\": \"ann\"}""#), "\(again)")
        #expect(text.contains("\n  username=ann&password1=<redacted>&new_password2=<redacted>\n"))
    }

    /// The transport's cookie jar adds `Cookie` after every hook: the logger learns it from the
    /// response's request fields, and scrubs it from the echo (httpbin's `/cookies`; it was printed).
    @Test func aCookieTheTransportsJarSentIsScrubbed() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        var configuration = CurlTransport.Configuration()
        configuration.cookies = true
        let provider = try f.provider(
            [("logger", ["level": "body", "output": "file", "file": f.root + "/requests.log"])],
            transport: try CurlTransport(configuration: configuration))
        let setting = ["rot13": "1", "h_Set-Cookie": Self.rot13("sid=jar-secret-12345; Path=/")]
        _ = try await provider.request(
            try Bin("fixture/respond", task: .requestParameters(parameters: setting, encoding: URLEncoding.queryString))
        ).value
        let response = try await provider.request(try Bin("cookies")).value
        #expect(try response.mapJSON()["cookies"]?["sid"]?.stringValue == "jar-secret-12345")
        let text = log(f)
        #expect(!text.contains("jar-secret-12345"), "\(text)")
        #expect(text.contains(#""sid": "<redacted>""#), "\(text)")
    }

    /// A `?` in a parameter's value (`next=/home?tab=1`, legal unescaped) hid the parameters
    /// before it: a response's `Location` and a fragment were logged with their tokens. A URL in
    /// a value has its own parameters redacted too.
    @Test func aQuestionMarkInAValueHidesNoParameter() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("logger", ["level": "headers", "output": "file", "file": f.root + "/requests.log"])])
        let location = "https://app.test/cb?access_token=loc-secret-1&next=/home?tab=1#access_token=frag-secret-2&state=/return?x=1"
        let nested = "https://app.test/cb?next=/in?refresh_token=nested-secret-3&tab=2"
        // A scheme-relative one keeps no password either (only `scheme://` was looked after).
        let relative = "//u:relative-secret-4@app.test/next"
        for (field, value) in [("h_Location", location), ("h_Content-Location", nested), ("h_Location", relative)] {
            _ = try await provider.request(
                try Bin(
                    "fixture/respond",
                    task: .requestParameters(parameters: ["rot13": "1", field: Self.rot13(value)], encoding: URLEncoding.queryString))
            ).value
        }
        let text = log(f)
        for secret in ["loc-secret-1", "frag-secret-2", "nested-secret-3", "relative-secret-4"] {
            #expect(!text.contains(secret), "\(secret) leaked into the log")
        }
        #expect(text.contains("  Location: https://app.test/cb?access_token=<redacted>&next=/home?tab=1#access_token=<redacted>&state=/return?x=1"))
        #expect(text.contains("  Content-Location: https://app.test/cb?next=/in?refresh_token=<redacted>&tab=2"))
        #expect(text.contains("  Location: //u:<redacted>@app.test/next"))
    }

    /// Every value the request's URL line shows redacted is scrubbed from the rest of the log:
    /// one inside another parameter's value (`next=/cb?access_token=…`), and a `+` in a value as
    /// the space a server reads (httpbin echoes the query's values in its body).
    @Test func valuesRedactedInTheRequestURLAreScrubbedFromEchoes() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        /// Sends the request to `url` as written (a target's parameters are escaped).
        struct RawURL: Interceptor {
            let url: String
            func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
                try request.setURL(url)
                return .proceed
            }
        }
        // And one in a query percent-encoded in a value (`next=%2Fcb%3Faccess_token%3D…`, a
        // redirect URL given as a parameter): it was shown, and not scrubbed.
        let raw =
            try TestServer.url().absoluteString
            + "/anything/echo?next=/cb?access_token=nested-secret-1&signature=plus+secret+2&code=plain-3"
            + "&back=%2Fcb%3Fx%3D1%26refresh_token%3Dencoded-secret-4%26y%3D2"
            + "&implicit=%2Fcb%23access_token%3Dencoded-secret-5&more=%2Fcb%3Ftoken%3Dencoded-secret-6?x=1"
        let provider = try f.provider(
            [("logger", ["level": "body", "output": "file", "file": f.root + "/requests.log"])], before: [RawURL(url: raw)])
        let echoed = try await provider.request(try Bin("get")).value
        #expect(String(decoding: echoed.data, as: UTF8.self).contains("plus secret 2"))
        let text = log(f)
        for secret in ["nested-secret-1", "plus secret 2", "plus+secret+2", "encoded-secret-4", "encoded-secret-5", "encoded-secret-6"] {
            #expect(!text.contains(secret), "\(secret) leaked into the log")
        }
        #expect(
            text.contains(
                "/anything/echo?next=/cb?access_token=<redacted>&signature=<redacted>&code=plain-3&back=%2Fcb%3Fx%3D1%26refresh_token%3D<redacted>%26y%3D2"
                    + "&implicit=%2Fcb%23access_token%3D<redacted>&more=%2Fcb%3Ftoken%3D<redacted>?x=1"
            ))
    }

    /// The cURL form is scrubbed before it is quoted (quoting rewrote a secret with `'`, or with
    /// non-ASCII bytes in `$'…'`, and the scrub missed it), sends its body with `--data-raw` (a
    /// body starting with `@` was a file for `--data-binary` to upload) and turns off globbing.
    @Test func theCURLFormIsScrubbedBeforeQuotingAndSendsNoFile() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([
            ("logger", ["level": "body", "output": "file", "file": f.root + "/requests.log", "curl": true, "maxBodyBytes": 100_000])
        ])
        let json = #"{"password": "it's-Secret-1", "password_confirmation": "it's-Secret-1"}"#
        let twoLines = "{\"password\": \"pässwört-2\",\n \"password_confirmation\": \"pässwört-2\"}"
        for body in [json, twoLines] {
            _ = try await provider.request(
                try Bin("anything", method: .post, task: .requestData(Data(body.utf8)), headers: ["Content-Type": "application/json"])
            ).value
        }
        _ = try await provider.request(try Bin("anything", method: .post, task: .requestData(Data("@/etc/passwd".utf8)))).value
        let text = log(f)
        for secret in ["it's-Secret-1", #"it'\''s-Secret-1"#, "pässwört-2", #"p\xc3\xa4ssw\xc3\xb6rt-2"#] {
            #expect(!text.contains(secret), "\(secret) leaked into the log")
        }
        #expect(text.contains("--data-raw '@/etc/passwd' --globoff '"))
        #expect(!text.contains("--data-binary"))
    }

    /// A body the log does not show (below level `body`, or over `maxBodyBytes`) is not in the
    /// cURL form either, and a comment says so: the form sent the placeholder `<7 bytes>` as data.
    @Test func theCURLFormSendsNoBodyTheLogDoesNotShow() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        for (level, maxBodyBytes, why) in [("headers", 4096, "level body shows it"), ("body", 4, "over maxBodyBytes, or not text")] {
            let file = f.root + "/\(level).log"
            let provider = try f.provider([
                ("logger", ["level": level, "output": "file", "file": file, "curl": true, "maxBodyBytes": maxBodyBytes])
            ])
            let target = try Bin("anything", method: .post, task: .requestData(Data(#"{"a":1}"#.utf8)))
            _ = try await provider.request(target).value
            let text = try String(contentsOfFile: file, encoding: .utf8)
            #expect(!text.contains("--data-raw"), "\(text)")
            #expect(text.contains("/anything' # the body (7 bytes) is not shown: \(why)\n"), "\(text)")
        }
    }

    /// The values of password and token fields in bodies (a JSON member at any depth, its name
    /// escaped or not, in any case; a form field) show as `<redacted>`: in a request's body, its
    /// cURL form and a response's body; and a request's are scrubbed from the rest (httpbin
    /// echoes the body back, as JSON and inside its `data` string). They used to be printed as
    /// they were. `redactFields` replaces the names.
    @Test func passwordAndTokenFieldsOfBodiesAreRedacted() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([
            ("logger", ["level": "body", "output": "file", "file": f.root + "/requests.log", "curl": true, "maxBodyBytes": 100_000])
        ])
        let password = "pw-" + UUID().uuidString
        let json =
            #"{"user": "ann", "Password": "\#(password)", "nested": {"client_secret": "s3cr3t-x", "pin": 1234}, "tags": ["keep"], "#
            + #""api_key": null, "password": "escaped-value-1"}"#
        _ = try await provider.request(
            try Bin("anything", method: .post, task: .requestData(Data(json.utf8)), headers: ["Content-Type": "application/json"])
        ).value
        let form = "user=ann&passwd=a+b%26c-d&note=hi"
        _ = try await provider.request(
            try Bin("anything", method: .post, task: .requestData(Data(form.utf8)), headers: ["Content-Type": "application/x-www-form-urlencoded"])
        ).value
        // A token the response holds, which the request never held (the fixture reads ROT13).
        _ = try await provider.request(
            try Bin(
                "fixture/respond",
                task: .requestParameters(
                    parameters: ["rot13": "1", "body": Self.rot13(#"{"access_token": "issued-abc-123", "expires_in": 3600}"#)],
                    encoding: URLEncoding.queryString))
        ).value
        let text = log(f)
        for secret in [password, "s3cr3t-x", "escaped-value-1", "a b&c-d", "a+b%26c-d", "issued-abc-123"] {
            #expect(!text.contains(secret), "\(secret) leaked into the log")
        }
        let shown =
            #"{"user": "ann", "Password": "<redacted>", "nested": {"client_secret": "<redacted>", "pin": 1234}, "tags": ["keep"], "#
            + #""api_key": "<redacted>", "password": "<redacted>"}"#
        #expect(text.contains("\n  " + shown + "\n"), "the request's body")
        #expect(text.contains("--data-raw '" + shown + "'"), "the cURL form")
        #expect(text.contains("\n  user=ann&passwd=<redacted>&note=hi\n"))
        #expect(text.contains(#""passwd": "<redacted>""#), "httpbin's echo of the form")
        #expect(text.contains("\n  " + #"{"access_token": "<redacted>", "expires_in": 3600}"#))

        let named = try f.provider([
            ("logger", ["level": "body", "output": "file", "file": f.root + "/named.log", "redactFields": ["NOTE"]])
        ])
        _ = try await named.request(
            try Bin("anything", method: .post, task: .requestData(Data(form.utf8)), headers: ["Content-Type": "application/x-www-form-urlencoded"])
        ).value
        let namedText = (try? String(contentsOfFile: f.root + "/named.log", encoding: .utf8)) ?? ""
        #expect(namedText.contains("\n  user=ann&passwd=a+b%26c-d&note=<redacted>\n"))
    }

    /// A secret inside a JSON string value: a GraphQL query's argument, a stringified payload's
    /// member (each redacted where it stands, and scrubbed from httpbin's echo); a variable in
    /// the argument's place stays.
    @Test func secretsInsideJSONStringsAreRedacted() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([
            ("logger", ["level": "body", "output": "file", "file": f.root + "/requests.log", "maxBodyBytes": 100_000])
        ])
        let bodies = [
            #"{"query": "mutation { login(user: \"ann\", password: \"gql-secret-1\") { token } }", "variables": {"pin": 1234}}"#,
            #"{"payload": "{\"password\": \"env-secret-2\", \"user\": \"ann\"}", "id": 7}"#,
            #"{"query": "mutation($pw: String!) { login(password: $pw, apiKey: 43219876) }", "variables": {"pw": "var-secret-8"}}"#,
            #"{"payload": "{\"secret\": {\"old\": \"so-secret-3\"}}", "old": "kept"}"#,
            #"{"query": "{ me(token: \"tok-secret-4\") { id } }"}"#,
            #"{"query": "mutation { login(password: \"\"\"blk-secret-5\"\"\") }"}"#,
            #"{"query": "mutation { rotate(secret: {old: \"s1-secret-6\", new: \"s2-secret-7\"}) }"}"#,
            #"{"error": "refresh failed, token: Bearer brr-secret-10 expired"}"#,
            #"{"query": "mutation($a: String!, $b: String!) { set(password: [$a, $b]) }", "variables": {"a": "lst-secret-11", "b": "lst-secret-12"}}"#,
            #"{"note": "password: $3cr3t-13 was set"}"#,
        ]
        for body in bodies {
            _ = try await provider.request(
                try Bin("anything", method: .post, task: .requestData(Data(body.utf8)), headers: ["Content-Type": "application/json"])
            ).value
        }
        let text = log(f)
        for secret in [
            "gql-secret-1", "env-secret-2", "43219876", "so-secret-3", "tok-secret-4", "blk-secret-5", "s1-secret-6", "s2-secret-7", "var-secret-8",
            "brr-secret-10", "lst-secret-11", "lst-secret-12", "3cr3t-13",
        ] {
            #expect(!text.contains(secret), "\(secret) leaked into the log")
        }
        let shown = [
            #"{"query": "mutation { login(user: \"ann\", password: \"<redacted>\") { token } }", "variables": {"pin": 1234}}"#,
            #"{"payload": "{\"password\": \"<redacted>\", \"user\": \"ann\"}", "id": 7}"#,
            // A variable passed as a secret: its value under `variables` is one, whatever its name.
            #"{"query": "mutation($pw: String!) { login(password: $pw, apiKey: \"<redacted>\") }", "variables": {"pw": "<redacted>"}}"#,
            // The secret's object whole; a member name in it is no secret to scrub elsewhere.
            #"{"payload": "{\"secret\": \"<redacted>\"}", "old": "kept"}"#,
            // A shorthand query (not JSON, though it begins with `{`), a block string, an input object.
            #"{"query": "{ me(token: \"<redacted>\") { id } }"}"#,
            #"{"query": "mutation { login(password: \"<redacted>\") }"}"#,
            #"{"query": "mutation { rotate(secret: \"<redacted>\") }"}"#,
            // The credentials after an authentication scheme, not the scheme alone.
            #"{"error": "refresh failed, token: \"<redacted>\" expired"}"#,
            // Variables in a secret's list (the list redacted whole, as any list under a secret's
            // name is) and their values; a `$` that starts no variable's name is a value.
            #"{"query": "mutation($a: String!, $b: String!) { set(password: \"<redacted>\") }", "variables": {"a": "<redacted>", "b": "<redacted>"}}"#,
            #"{"note": "password: \"<redacted>\" was set"}"#,
        ]
        for body in shown { #expect(text.contains("\n  " + body + "\n"), "the request's body: \(body)") }

        // A query the body's cut (`maxBodyBytes`) ends in: redacted as far as it goes.
        let cut = try f.provider([("logger", ["level": "body", "output": "file", "file": f.root + "/cut.log", "maxBodyBytes": 90])])
        let long =
            #"{"query": "mutation { login(user: \"ann\", password: \"cut-secret-9\") { token "# + String(repeating: "x ", count: 100) + #"} }"}"#
        _ = try await cut.request(
            try Bin("anything", method: .post, task: .requestData(Data(long.utf8)), headers: ["Content-Type": "application/json"])
        ).value
        let cutText = (try? String(contentsOfFile: f.root + "/cut.log", encoding: .utf8)) ?? ""
        #expect(!cutText.contains("cut-secret-9"), "\(cutText)")
        #expect(cutText.contains("\n  " + #"{"query": "mutation { login(user: \"ann\", password: \"<redacted>\") { token x x"#), "\(cutText)")
    }

    /// A `multipart/form-data` body's password and token parts show as `<redacted>` (by their
    /// `Content-Disposition` name), their headers and the other parts as they were: the
    /// provider's own multipart uploads, and a body built with a boundary that must be quoted
    /// (with a space and a quote). A part a cut ends in is redacted to the cut. They used to be printed whole, and httpbin's echo scrubbed them nowhere.
    @Test func passwordAndTokenPartsOfMultipartBodiesAreRedacted() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([
            ("logger", ["level": "body", "output": "file", "file": f.root + "/requests.log", "curl": true, "maxBodyBytes": 100_000])
        ])
        let password = "mp-" + UUID().uuidString
        let token = "tk-" + UUID().uuidString
        _ = try await provider.request(
            try Bin(
                "anything", method: .post,
                task: .uploadMultipart([
                    .text("ann", name: "user"), .text(password, name: "password"),
                    MultipartFormBodyPart(source: .data(Data("file-body-1".utf8)), name: "upload", fileName: "a.txt", mimeType: "text/plain"),
                    .text("hello", name: "note"),
                ]))
        ).value
        let boundary = "my boundary'(x)"
        let body = try MultipartFormData.encode(
            [.text(token, name: "access_token"), .text("keep-me", name: "comment")], boundary: boundary)
        _ = try await provider.request(
            try Bin(
                "anything", method: .post, task: .requestData(body),
                headers: ["Content-Type": MultipartFormData.contentType(boundary: boundary)])
        ).value
        let text = log(f)
        for secret in [password, token] {
            #expect(!text.contains(secret), "\(secret) leaked into the log")
        }
        for kept in ["ann", "file-body-1", "hello", "keep-me", #"name="upload"; filename="a.txt""#] {
            #expect(text.contains(kept), "\(kept) is missing from the log")
        }
        #expect(text.components(separatedBy: #"name="password""#).count == 3, "the part's header, in the body and the cURL form")
        // Each secret part: in the body, its cURL form and httpbin's echo of the form.
        #expect(text.components(separatedBy: "<redacted>").count == 7, "\(text)")

        // Bodies made by hand: a boundary holding `json` (the body was read as JSON, and printed
        // whole), lines ending in LF alone, a value holding `--` and the boundary within a line.
        let handMade: [(boundary: String, body: String, secret: String)] = [
            ("b-json-1", "--b-json-1\r\nContent-Disposition: form-data; name=\"password\"\r\n\r\nhm-secret-1\r\n--b-json-1--\r\n", "hm-secret-1"),
            ("lf", "--lf\nContent-Disposition: form-data; name=\"password\"\n\nhm-secret-2\n--lf--\n", "hm-secret-2"),
            ("b", "--b\r\nContent-Disposition: form-data; name=\"password\"\r\n\r\nhm--bad-3\r\n--b--\r\n", "hm--bad-3"),
        ]
        let handLog = try f.provider([("logger", ["level": "body", "output": "file", "file": f.root + "/hand.log", "maxBodyBytes": 100_000])])
        for made in handMade {
            _ = try await handLog.request(
                try Bin(
                    "anything", method: .post, task: .requestData(Data(made.body.utf8)),
                    headers: ["Content-Type": "multipart/form-data; boundary=\(made.boundary)"])
            ).value
        }
        let handText = (try? String(contentsOfFile: f.root + "/hand.log", encoding: .utf8)) ?? ""
        for made in handMade {
            #expect(!handText.contains(made.secret), "\(made.secret) leaked into the log")
        }
        #expect(!handText.contains("ad-3"), "the part of a value after `--b` leaked")
        #expect(handText.contains("hm-") == false, "\(handText)")

        let cut = try f.provider([("logger", ["level": "body", "output": "file", "file": f.root + "/cut.log", "maxBodyBytes": 240])])
        // 240 bytes end 25 bytes into the password's value (after the boundary lines, the user
        // part and the password part's header: 215 bytes).
        let long = "cut-" + String(repeating: "s", count: 200)
        _ = try await cut.request(
            try Bin("anything", method: .post, task: .uploadMultipart([.text("ann", name: "user"), .text(long, name: "password")]))
        ).value
        let cutText = (try? String(contentsOfFile: f.root + "/cut.log", encoding: .utf8)) ?? ""
        #expect(!cutText.contains("cut-s"), "\(cutText)")
        #expect(cutText.contains("<redacted>… (truncated, "), "\(cutText)")
    }

    /// Field names are matched as apps spell them (`AccessToken`, `new_password`, a form's
    /// `user[password]`); `null`, `true` and numbers are redacted in place only, never scrubbed
    /// from the rest of the log; a value an echo re-escapes (`\u00e4`) is scrubbed in that form too.
    @Test func fieldNamesAsAppsSpellThemAndLiteralsStayElsewhere() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([
            ("logger", ["level": "body", "output": "file", "file": f.root + "/requests.log", "maxBodyBytes": 100_000])
        ])
        let json =
            #"{"user": "ann", "password": null, "remember": true, "AccessToken": "at-12345678", "new_password": "pä-ss-12345", "#
            + #""token_type": "Bearer", "attempts": 3}"#
        _ = try await provider.request(
            try Bin("anything", method: .post, task: .requestData(Data(json.utf8)), headers: ["Content-Type": "application/json"])
        ).value
        let form = "user[password]=fp-12345678&user[name]=ann&user[password2]=fq-12345678&password[]=fr-12345678&token[0]=fs-12345678"
        _ = try await provider.request(
            try Bin("anything", method: .post, task: .requestData(Data(form.utf8)), headers: ["Content-Type": "application/x-www-form-urlencoded"])
        ).value
        let text = log(f)
        for secret in ["at-12345678", "pä-ss-12345", "p\\u00e4-ss-12345", "fp-12345678", "fq-12345678", "fr-12345678", "fs-12345678"] {
            #expect(!text.contains(secret), "\(secret) leaked into the log")
        }
        let shown =
            #"{"user": "ann", "password": "<redacted>", "remember": true, "AccessToken": "<redacted>", "new_password": "<redacted>", "#
            + #""token_type": "Bearer", "attempts": 3}"#
        #expect(text.contains("\n  " + shown + "\n"), "\(text)")
        #expect(
            text.contains("\n  user[password]=<redacted>&user[name]=ann&user[password2]=<redacted>&password[]=<redacted>&token[0]=<redacted>\n"),
            "\(text)")
        // httpbin's echo keeps its literals: nothing scrubbed them.
        #expect(text.contains(#""remember": true"#))
        #expect(!text.contains("<redacted>able"))
    }

    /// Names with a run of capitals (`DBPassword`, `XApiKey`, `CSRFToken`) are split into words
    /// as `dbPassword` is; the last value of a cut form is redacted in place only (its start,
    /// `sec`, was scrubbed from the request's URL); a value with a tab is scrubbed from an echo
    /// that writes it `\t`, as `json.dumps` does.
    @Test func acronymNamesCutFormsAndShortEscapesInEchoes() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([
            ("logger", ["level": "body", "output": "file", "file": f.root + "/requests.log", "maxBodyBytes": 100_000])
        ])
        let json =
            "{\"DBPassword\": \"db-12345678\", \"XApiKey\": \"xk-12345678\", \"CSRFToken\": \"cs-12345678\", \"password\": \"p\u{E4}\tss-12345\"}"
        _ = try await provider.request(
            try Bin("anything", method: .post, task: .requestData(Data(json.utf8)), headers: ["Content-Type": "application/json"])
        ).value
        let text = log(f)
        for secret in ["db-12345678", "xk-12345678", "cs-12345678", "p\\u00e4\\tss-12345"] {
            #expect(!text.contains(secret), "\(secret) leaked into the log")
        }
        #expect(text.contains(#"{"DBPassword": "<redacted>", "XApiKey": "<redacted>", "CSRFToken": "<redacted>", "password": "<redacted>"}"#))

        let cut = try f.provider([("logger", ["level": "body", "output": "file", "file": f.root + "/cut.log", "maxBodyBytes": 21])])
        let form = "user=ann&password=secret-12345"
        _ = try await cut.request(
            try Bin(
                "anything/secure", method: .post, task: .requestData(Data(form.utf8)),
                headers: ["Content-Type": "application/x-www-form-urlencoded"])
        ).value
        let cutText = (try? String(contentsOfFile: f.root + "/cut.log", encoding: .utf8)) ?? ""
        #expect(cutText.contains("/anything/secure #"), "\(cutText)")
        #expect(cutText.contains("\n  user=ann&password=<redacted>… (truncated, 30 bytes in all)\n"), "\(cutText)")
    }

    /// A body cannot forge a log line: its line breaks are indented under it, and other control
    /// characters escaped, so every line begins with `→`, `←` or two spaces.
    @Test func aBodyCannotForgeALogLine() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("logger", ["level": "body", "output": "file", "file": f.root + "/requests.log"])])
        let forged = "ok\n← 200 admin #1 (0.1 ms, 2 bytes)\r\u{1b}[2Jdone"
        _ = try await provider.request(
            try Bin(
                "fixture/respond", task: .requestParameters(parameters: ["body": forged, "type": "text/plain"], encoding: URLEncoding.queryString))
        ).value
        let lines = log(f).split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        #expect(lines.allSatisfy { $0.hasPrefix("→ ") || $0.hasPrefix("← ") || $0.hasPrefix("  ") }, "\(lines)")
        #expect(lines.contains("  ok"))
        #expect(lines.contains("  ← 200 admin #1 (0.1 ms, 2 bytes)\\r\\u{1B}[2Jdone"))
        // C1 controls and Unicode line separators too; and the cURL form keeps the exact body in
        // one line (`$'…'`), where indenting it would change what the command sends.
        let curl = try f.provider([("logger", ["level": "body", "output": "file", "file": f.root + "/curl.log", "curl": true])])
        _ = try await curl.request(
            try Bin("anything", method: .post, task: .requestData(Data("a\nb'c\u{2028}d\u{9B}e".utf8)), headers: ["Content-Type": "text/plain"])
        ).value
        let curlLog = (try? String(contentsOfFile: f.root + "/curl.log", encoding: .utf8)) ?? ""
        let curlLines = curlLog.split(separator: "\n").map(String.init)
        #expect(curlLines.allSatisfy { $0.hasPrefix("→ ") || $0.hasPrefix("← ") || $0.hasPrefix("  ") }, "\(curlLines)")
        #expect(curlLines.contains("  a"))
        #expect(curlLines.contains("  b'c\\u{2028}d\\u{9B}e"))
        #expect(curlLog.contains(#"--data-raw $'a\nb\'c\xe2\x80\xa8d\xc2\x9be'"#))
    }

    @Test func hostLogSink() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("logger", ["output": "host"])])
        let lines = LockedCounter()
        provider.services.setLogHandler { level, plugin, message in lines.append("\(level) \(plugin) \(message.prefix(6))") }
        _ = try await provider.request(try Bin("get")).value
        #expect(lines.log == ["info logger → GET ", "info logger ← 200 "])
    }

    @Test func offLogsNothing() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("logger", ["level": "off", "output": "file", "file": f.root + "/requests.log"])])
        _ = try await provider.request(try Bin("get")).value
        #expect(log(f).isEmpty)
    }
}
