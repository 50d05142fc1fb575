import PluginSDK
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("Random bytes")
struct RandomBytesTests {
    /// Nonces (16 bytes, from the per-thread pool) never repeat, and large requests (straight
    /// from the system) work too.
    @Test func smallAndLargeRequestsAreDistinct() {
        var seen = Set<[UInt8]>()
        for _ in 0..<2000 { seen.insert(RandomBytes.make(16)) }
        #expect(seen.count == 2000)
        let large = RandomBytes.make(4096)
        #expect(large.count == 4096)
        #expect(Set(large).count > 200)
        #expect(RandomBytes.make(0).isEmpty)
    }

    #if os(Linux)
    /// A forked child must not hand out the bytes its parent's pool still holds: parent and child
    /// each take the next 16 bytes after the fork, and they differ.
    @Test func aForkedChildDoesNotReuseTheParentsPool() throws {
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        // Fill the pool of this thread first, synchronously (no suspension: one thread throughout).
        var primer = [UInt8](repeating: 0, count: 16)
        primer.withUnsafeMutableBufferPointer { RandomBytes.fill($0) }
        let child = fork()
        if child == 0 {
            // The child only uses the stack, the pool and system calls before it exits.
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 16) { buffer in
                RandomBytes.fill(buffer)
                _ = write(fds[1], buffer.baseAddress, 16)
            }
            _exit(0)
        }
        #expect(child > 0)
        var mine = [UInt8](repeating: 0, count: 16)
        mine.withUnsafeMutableBufferPointer { RandomBytes.fill($0) }
        close(fds[1])
        var theirs = [UInt8](repeating: 0, count: 16)
        let got = theirs.withUnsafeMutableBytes { read(fds[0], $0.baseAddress, 16) }
        close(fds[0])
        var status: Int32 = 0
        waitpid(child, &status, 0)
        #expect(got == 16)
        #expect(mine != theirs)
    }
    #endif
}
