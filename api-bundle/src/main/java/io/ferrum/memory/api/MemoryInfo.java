package io.ferrum.memory.api;

import java.util.Objects;
import java.util.OptionalDouble;

/**
 * A consistent snapshot of one device's memory, as the managers account for it (definitions in
 * {@code docs/ARCHITECTURE.md}):
 *
 * <ul>
 *   <li>{@code totalBytes}: the device's capacity available to this manager;</li>
 *   <li>{@code usedBytes}: bytes of live blocks (handed out and not yet freed, alignment padding
 *       included);</li>
 *   <li>{@code freeBytes}: {@code totalBytes - usedBytes};</li>
 *   <li>{@code reservedBytes}: bytes the pools hold from the device, used or not;</li>
 *   <li>{@code activeAllocations}: the number of live blocks, the blocks {@code usedBytes} counts: a
 *       mapping's block, named by two handles, counts once, and a block freed while an asynchronous
 *       copy still uses it counts until the copy ends;</li>
 *   <li>{@code fragmentationRatio}: the share of the free space inside the reserved chunks that lies
 *       outside the largest free run of its own chunk (holes between live blocks; free space split
 *       only by chunk boundaries is none), in {@code [0, 1]}, and 0 when nothing there is free;</li>
 *   <li>{@code bandwidthGbps}: copy bandwidth measured from real copies, in GB/s (10^9 bytes per
 *       second); empty before the first copy. The seed's {@code Option<f32>} becomes an
 *       {@link OptionalDouble} rather than a nullable box.</li>
 * </ul>
 *
 * @param totalBytes         capacity, zero or more
 * @param usedBytes          live bytes, zero or more
 * @param freeBytes          capacity not in live blocks, zero or more
 * @param reservedBytes      bytes held from the device, zero or more
 * @param activeAllocations  live blocks, zero or more
 * @param fragmentationRatio in {@code [0, 1]}
 * @param bandwidthGbps      measured copy bandwidth, or empty; not null
 */
public record MemoryInfo(long totalBytes, long usedBytes, long freeBytes, long reservedBytes,
                         long activeAllocations, double fragmentationRatio, OptionalDouble bandwidthGbps) {

    /**
     * @throws InvalidMemoryRequestException on a negative count or a ratio outside [0, 1]
     */
    public MemoryInfo {
        if (totalBytes < 0 || usedBytes < 0 || freeBytes < 0 || reservedBytes < 0 || activeAllocations < 0) {
            throw new InvalidMemoryRequestException("Invalid memory info: byte counts and allocations must be zero or more"
                    + " (total " + totalBytes + ", used " + usedBytes + ", free " + freeBytes
                    + ", reserved " + reservedBytes + ", allocations " + activeAllocations + ")");
        }
        if (!(fragmentationRatio >= 0.0 && fragmentationRatio <= 1.0)) {
            throw new InvalidMemoryRequestException("Invalid fragmentation ratio " + fragmentationRatio
                    + ": must lie in [0, 1]");
        }
        Objects.requireNonNull(bandwidthGbps, "bandwidthGbps: use OptionalDouble.empty() when not measured");
    }

    /**
     * @return {@code usedBytes / totalBytes * 100}, or 0 when {@code totalBytes} is 0
     */
    public double utilizationPercent() {
        return totalBytes > 0 ? (double) usedBytes / (double) totalBytes * 100.0 : 0.0;
    }

    /**
     * @return the pressure level for {@link #utilizationPercent()} (see {@link MemoryPressure})
     */
    public MemoryPressure pressureLevel() {
        return MemoryPressure.forUtilization(utilizationPercent());
    }
}
