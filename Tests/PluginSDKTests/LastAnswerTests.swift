import PluginSDK
import Testing

@Suite("the last answer kept")
struct LastAnswerTests {
    @Test func theSameInputIsAnsweredWithoutComputingAgain() {
        let memory = LastAnswer<String, String>()
        let computed = Locked<[String]>([])
        func ask(_ input: String) -> String {
            memory.answer(for: input) { input in
                computed.withLock { $0.append(input) }
                return "answer to " + input
            }
        }
        #expect(["a", "a", "b", "b", "a"].map(ask) == ["answer to a", "answer to a", "answer to b", "answer to b", "answer to a"])
        // Only the last input is kept: a, then b, then a again.
        #expect(computed.withLock { $0 } == ["a", "b", "a"])
    }

    @Test func stringsAreTheSameOnlyAsTheSameBytes() {
        // "é" precomposed and as e + combining accent: equal to `==`, other bytes to send or sign.
        let precomposed = "caf\u{E9}"
        let decomposed = "cafe\u{301}"
        #expect(precomposed == decomposed)
        #expect(!UTF8Bytes.equal(precomposed, decomposed) && UTF8Bytes.equal(precomposed, "caf\u{E9}"))
        #expect(UTF8Bytes.equal("", "") && !UTF8Bytes.equal("a", "") && !UTF8Bytes.equal("ab", "ac"))
        let memory = LastAnswer<String, [UInt8]>()
        for input in [precomposed, decomposed, decomposed, precomposed] {
            #expect(memory.answer(for: input) { Array($0.utf8) } == Array(input.utf8))
        }
    }

    @Test func targetsAreTheSameOnlyAsTheSameBytes() {
        let precomposed = "caf\u{E9}"
        let decomposed = "cafe\u{301}"
        let target = TargetInfo(method: "GET", baseURL: "http://a.test", path: "/x", pluginOptions: ["url": precomposed, "k": "v"])
        #expect(
            TargetInfo.sameBytes(
                target, TargetInfo(method: "GET", baseURL: "http://a.test", path: "/x", pluginOptions: ["k": "v", "url": precomposed])))
        let variants = [
            TargetInfo(method: "GET", baseURL: "http://a.test", path: "/x", pluginOptions: ["url": decomposed, "k": "v"]),
            TargetInfo(method: "GET", baseURL: "http://a.test", path: "/x", pluginOptions: [precomposed: "url", "k": "v"]),
            TargetInfo(method: "GET", baseURL: "http://a.test", path: "/" + decomposed, pluginOptions: ["url": precomposed, "k": "v"]),
            TargetInfo(method: "GET", baseURL: "http://a.test", path: "/x", pluginOptions: ["url": precomposed]),
        ]
        // The first is `==` to the target (canonically equal), not the same bytes; none of them is.
        #expect(variants[0] == target)
        for variant in variants { #expect(!TargetInfo.sameBytes(target, variant) && !TargetInfo.sameBytes(variant, target)) }
        // A key of other bytes than the other target's equal key.
        let keyed = TargetInfo(method: "GET", baseURL: "", path: "", pluginOptions: [precomposed: "1"])
        #expect(!TargetInfo.sameBytes(keyed, TargetInfo(method: "GET", baseURL: "", path: "", pluginOptions: [decomposed: "1"])))
    }

    @Test func concurrentAskersGetTheirOwnInputsAnswer() async {
        let memory = LastAnswer<Int, Int>()
        let wrong = await withTaskGroup(of: Int.self) { group in
            for task in 0..<8 {
                group.addTask {
                    var wrong = 0
                    for round in 0..<2_000 {
                        let input = (task + round) % 3
                        if memory.answer(for: input, { $0 * 10 }) != input * 10 { wrong += 1 }
                    }
                    return wrong
                }
            }
            return await group.reduce(0, +)
        }
        #expect(wrong == 0)
    }
}
