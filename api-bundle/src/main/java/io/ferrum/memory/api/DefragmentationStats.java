package io.ferrum.memory.api;

/**
 * What one defragmentation (compaction and trimming) achieved.
 *
 * @param memoryFreed         bytes given back to the device (reserved before minus after), zero or more
 * @param blocksMoved         live blocks relocated, zero or more
 * @param timeTakenMs         wall-clock milliseconds the run took, zero or more
 * @param fragmentationBefore fragmentation ratio before, in [0, 1]
 * @param fragmentationAfter  fragmentation ratio after, in [0, 1]
 */
public record DefragmentationStats(long memoryFreed, long blocksMoved, long timeTakenMs,
                                   double fragmentationBefore, double fragmentationAfter) {

    /**
     * @throws InvalidMemoryRequestException on a negative count or a ratio outside [0, 1]
     */
    public DefragmentationStats {
        if (memoryFreed < 0 || blocksMoved < 0 || timeTakenMs < 0) {
            throw new InvalidMemoryRequestException("Invalid defragmentation stats: counts must be zero or more (freed "
                    + memoryFreed + ", moved " + blocksMoved + ", ms " + timeTakenMs + ")");
        }
        if (!(fragmentationBefore >= 0.0 && fragmentationBefore <= 1.0)
                || !(fragmentationAfter >= 0.0 && fragmentationAfter <= 1.0)) {
            throw new InvalidMemoryRequestException("Invalid defragmentation stats: ratios must lie in [0, 1] (before "
                    + fragmentationBefore + ", after " + fragmentationAfter + ")");
        }
    }
}
