/// The compression function of a Merkle–Damgård hash (MD5, SHA-512): its state, and how one
/// block changes it.
protocol BlockCompression: Sendable {
    /// Bytes per block.
    static var blockSize: Int { get }
    /// Bytes of the message length at the end of the padding (8 for MD5, 16 for SHA-512).
    static var lengthBytes: Int { get }
    /// Whether the length is written big-endian (SHA-512) or little-endian (MD5).
    static var bigEndianLength: Bool { get }
    /// Mixes one block (exactly ``blockSize`` bytes) into the state.
    mutating func compress(_ block: UnsafeRawBufferPointer)
}

/// A ``BlockCompression`` fed bytes in parts of any size: whole blocks of the input are
/// compressed where they are, the rest waits for the next part (at most one block held).
struct BlockFeed<Compression: BlockCompression>: Sendable {
    private var compression: Compression
    /// Bytes of a block not yet complete (fewer than a block).
    private var pending: [UInt8] = []
    /// Bytes fed so far.
    private var length: UInt64 = 0

    init(_ compression: Compression) {
        self.compression = compression
    }

    /// Adds bytes.
    mutating func update(_ bytes: UnsafeRawBufferPointer) {
        let size = Compression.blockSize
        length &+= UInt64(bytes.count)
        var rest = bytes[...]
        if !pending.isEmpty {
            let take = min(size - pending.count, rest.count)
            pending += rest.prefix(take)
            rest = rest.dropFirst(take)
            guard pending.count == size else { return }
            let block = pending
            block.withUnsafeBytes { compression.compress($0) }
            pending.removeAll(keepingCapacity: true)
        }
        while rest.count >= size {
            compression.compress(UnsafeRawBufferPointer(rebasing: rest.prefix(size)))
            rest = rest.dropFirst(size)
        }
        pending += rest
    }

    /// The state after the padding of every byte fed so far (the feed may go on: the padding
    /// goes into a copy): 0x80, zeros, and the length in bits, ending a block.
    func padded() -> Compression {
        var copy = self
        let size = Compression.blockSize
        let lengthBytes = Compression.lengthBytes
        var tail: [UInt8] = [0x80]
        while (pending.count + tail.count + lengthBytes) % size != 0 { tail.append(0) }
        // The length in bits, in `lengthBytes` bytes (those past 8 are zero).
        let bitLength = length &* 8
        var written = [UInt8](repeating: 0, count: lengthBytes)
        for index in 0..<8 {
            let byte = UInt8(truncatingIfNeeded: bitLength >> UInt64(8 * index))
            written[Compression.bigEndianLength ? lengthBytes - 1 - index : index] = byte
        }
        tail += written
        tail.withUnsafeBytes { copy.update($0) }
        return copy.compression
    }
}
