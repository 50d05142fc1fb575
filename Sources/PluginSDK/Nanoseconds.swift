extension Double {
    /// These seconds as whole nanoseconds, for a sleep, a deadline or an age: 0 for zero, a
    /// negative number or NaN; at most `Int64.max` (292 years) for more, infinity included, which
    /// every clock and sleep takes without overflow (`UInt64(seconds * 1e9)` traps past 584 years,
    /// and a sleep of more than `Int64.max` nanoseconds would end at once).
    @usableFromInline
    package var saturatingNanoseconds: UInt64 {
        guard self > 0 else { return 0 }
        let nanoseconds = self * 1e9
        return nanoseconds < 0x1p63 ? UInt64(nanoseconds) : UInt64(Int64.max)
    }
}
