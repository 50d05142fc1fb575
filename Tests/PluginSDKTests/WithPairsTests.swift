import CPluginABI
import PluginSDK
import Testing

/// `CBytes.withPairs`, which lays out a batch of header edits for the host: one pass into 1 KiB on
/// the stack, or, for a batch larger than that, counted first and laid out in a buffer of its size.
@Suite("Name and value pairs laid out as C bytes")
struct WithPairsTests {
    /// What `body` received, read back as strings, and how many times each pair was read.
    func layOut(_ pairs: [(String, String)]) -> (received: [(String, String)], reads: [Int]) {
        var reads = [Int](repeating: 0, count: pairs.count)
        let received = CBytes.withPairs(
            count: pairs.count,
            { index -> (name: String, value: String) in
                reads[index] += 1
                return pairs[index]
            },
            { names, values, count -> [(String, String)] in
                (0..<count).map { (CBytes.string(names![$0]), CBytes.string(values![$0])) }
            })
        return (received, reads)
    }

    /// `count` pairs whose names and values take `total` bytes in all (ASCII and two-byte letters).
    func pairs(count: Int, total: Int) -> [(String, String)] {
        guard count > 0 else { return [] }
        var left = total
        return (0..<count).map { index in
            let share = index == count - 1 ? left : total / count
            left -= share
            let name = String(repeating: "n", count: share / 2)
            // A two-byte letter where it fits, to count bytes and not characters.
            let valueBytes = share - name.utf8.count
            let value = valueBytes >= 2 ? "é" + String(repeating: "v", count: valueBytes - 2) : String(repeating: "v", count: valueBytes)
            return (name, value)
        }
    }

    @Test(arguments: [0, 1, 1023, 1024, 1025, 4000])
    func everyPairArrivesWholeAndIsReadOnceWhenTheBatchFitsTwiceWhenNot(total: Int) {
        let batch = pairs(count: total == 0 ? 0 : 5, total: total)
        #expect(batch.reduce(0) { $0 + $1.0.utf8.count + $1.1.utf8.count } == total)
        let (received, reads) = layOut(batch)
        #expect(received.count == batch.count)
        for (got, sent) in zip(received, batch) {
            #expect(got.0 == sent.0 && got.1 == sent.1)
        }
        #expect(reads.allSatisfy { $0 == (total <= 1024 ? 1 : 2) })
    }

    @Test func aBatchThatOverflowsInTheMiddleIsLaidOutWhole() {
        // The first pair fits, the second overflows the stack buffer, the third is counted.
        let batch = [("a", String(repeating: "x", count: 600)), ("b", String(repeating: "y", count: 600)), ("c", "z")]
        let (received, reads) = layOut(batch)
        #expect(received.map(\.0) == ["a", "b", "c"])
        #expect(received.map(\.1) == batch.map(\.1))
        #expect(reads == [2, 2, 2])
    }

    @Test func noPairsMakeAnEmptyCall() {
        let count = CBytes.withPairs(count: 0, { _ in ("", "") }, { _, _, count in count })
        #expect(count == 0)
    }
}
