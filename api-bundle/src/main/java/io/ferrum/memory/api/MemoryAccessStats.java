package io.ferrum.memory.api;

import java.time.Instant;

/**
 * Access statistics of one block, gathered from copies into and out of it and from mappings.
 *
 * @param readCount    reads (copies out of the block, read mappings), zero or more
 * @param writeCount   writes (copies into the block, write mappings), zero or more
 * @param avgReadSize  mean bytes per read, zero when there was none
 * @param avgWriteSize mean bytes per write, zero when there was none
 * @param lastAccess   the most recent access, or the allocation time before any; not null
 * @param patternType  the detected pattern, not null
 */
public record MemoryAccessStats(long readCount, long writeCount, long avgReadSize, long avgWriteSize,
                                Instant lastAccess, AccessPatternType patternType) {

    /**
     * @throws InvalidMemoryRequestException on a negative count or a null field
     */
    public MemoryAccessStats {
        if (readCount < 0 || writeCount < 0 || avgReadSize < 0 || avgWriteSize < 0) {
            throw new InvalidMemoryRequestException("Invalid access stats: counts and sizes must be zero or more");
        }
        if (lastAccess == null || patternType == null) {
            throw new InvalidMemoryRequestException("Invalid access stats: lastAccess and patternType are required");
        }
    }
}
