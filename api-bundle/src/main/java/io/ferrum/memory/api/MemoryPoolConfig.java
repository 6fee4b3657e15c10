package io.ferrum.memory.api;

import java.util.OptionalLong;

/**
 * How one pool (one {@link MemoryType} on one device) reserves memory from its device.
 *
 * <ul>
 *   <li>{@code initialSize}: bytes reserved when the pool is first used (all at once when
 *       {@code preAllocate}, else on demand up to this size before growth starts);</li>
 *   <li>{@code maxSize}: a hard limit on bytes the pool may reserve; empty means limited only by
 *       the device;</li>
 *   <li>{@code growthIncrement}: bytes added when the pool grows (or the request, if larger);</li>
 *   <li>{@code enableAutoExpansion}: false means a full pool fails with {@link
 *       OutOfDeviceMemoryException} instead of growing;</li>
 *   <li>{@code alignment}: minimum alignment of every block, a power of two;</li>
 *   <li>{@code preAllocate}: reserve {@code initialSize} up front instead of on first use;</li>
 *   <li>{@code enableStats}: keep access statistics and bandwidth figures (off is faster).</li>
 * </ul>
 *
 * <p>Build one with {@link #builder()} or {@link #toBuilder()}: the record validates the whole
 * combination at once, so a builder avoids invalid intermediate states.
 *
 * @param initialSize         bytes, zero or more
 * @param maxSize             bytes, at least {@code initialSize}, or empty for unlimited; not null
 * @param growthIncrement     bytes, zero or more; more than zero when auto-expansion is on
 * @param enableAutoExpansion whether the pool may grow beyond what it holds
 * @param alignment           bytes, a power of two
 * @param preAllocate         whether {@code initialSize} is reserved immediately
 * @param enableStats         whether statistics are kept
 */
public record MemoryPoolConfig(long initialSize, OptionalLong maxSize, long growthIncrement,
                               boolean enableAutoExpansion, long alignment, boolean preAllocate,
                               boolean enableStats) {

    /** 1 GiB, the seed's default initial size. */
    public static final long DEFAULT_INITIAL_SIZE = 1L << 30;
    /** 512 MiB, the seed's default growth increment. */
    public static final long DEFAULT_GROWTH_INCREMENT = 512L << 20;
    /** 256 bytes, the seed's default alignment (what CUDA's allocator guarantees). */
    public static final long DEFAULT_ALIGNMENT = 256;

    /**
     * @throws InvalidMemoryRequestException when a value is negative, the alignment is not a power
     *                                       of two, {@code maxSize < initialSize}, or auto-expansion
     *                                       is on with a growth increment of zero
     */
    public MemoryPoolConfig {
        if (maxSize == null) {
            throw new InvalidMemoryRequestException("Invalid pool configuration: maxSize must not be null"
                    + " (use OptionalLong.empty() for unlimited)");
        }
        if (initialSize < 0) {
            throw new InvalidMemoryRequestException("Invalid pool configuration: initialSize " + initialSize
                    + " bytes must be zero or more");
        }
        if (growthIncrement < 0) {
            throw new InvalidMemoryRequestException("Invalid pool configuration: growthIncrement " + growthIncrement
                    + " bytes must be zero or more");
        }
        if (alignment <= 0 || Long.bitCount(alignment) != 1) {
            throw new InvalidMemoryRequestException("Invalid pool configuration: alignment " + alignment
                    + " is not a power of two (use 1, 2, 4, ... 256, ...)");
        }
        if (maxSize.isPresent() && maxSize.getAsLong() < initialSize) {
            throw new InvalidMemoryRequestException("Invalid pool configuration: maxSize " + maxSize.getAsLong()
                    + (maxSize.getAsLong() == 1 ? " byte" : " bytes") + " is smaller than initialSize " + initialSize
                    + (initialSize == 1 ? " byte" : " bytes"));
        }
        if (enableAutoExpansion && growthIncrement == 0) {
            throw new InvalidMemoryRequestException("Invalid pool configuration: growthIncrement is 0 while"
                    + " enableAutoExpansion is on; give a growth increment or turn auto-expansion off");
        }
    }

    /**
     * The seed's defaults: 1 GiB initial, unlimited, 512 MiB growth, auto-expansion on, 256-byte
     * alignment, no pre-allocation, statistics on.
     *
     * @return the default configuration
     */
    public static MemoryPoolConfig defaults() {
        return new MemoryPoolConfig(DEFAULT_INITIAL_SIZE, OptionalLong.empty(), DEFAULT_GROWTH_INCREMENT,
                true, DEFAULT_ALIGNMENT, false, true);
    }

    /** @return a builder holding {@link #defaults()} */
    public static Builder builder() {
        return defaults().toBuilder();
    }

    /** @return a builder holding this configuration's values */
    public Builder toBuilder() {
        return new Builder(this);
    }

    /**
     * A mutable builder; {@link #build()} validates the combination. Not thread-safe.
     */
    public static final class Builder {
        private long initialSize;
        private OptionalLong maxSize;
        private long growthIncrement;
        private boolean enableAutoExpansion;
        private long alignment;
        private boolean preAllocate;
        private boolean enableStats;

        private Builder(MemoryPoolConfig from) {
            initialSize = from.initialSize;
            maxSize = from.maxSize;
            growthIncrement = from.growthIncrement;
            enableAutoExpansion = from.enableAutoExpansion;
            alignment = from.alignment;
            preAllocate = from.preAllocate;
            enableStats = from.enableStats;
        }

        /** @param bytes initial size @return this builder */
        public Builder initialSize(long bytes) {
            initialSize = bytes;
            return this;
        }

        /** @param bytes hard limit @return this builder */
        public Builder maxSize(long bytes) {
            maxSize = OptionalLong.of(bytes);
            return this;
        }

        /** Removes the limit. @return this builder */
        public Builder unlimited() {
            maxSize = OptionalLong.empty();
            return this;
        }

        /** @param bytes growth increment @return this builder */
        public Builder growthIncrement(long bytes) {
            growthIncrement = bytes;
            return this;
        }

        /** @param enabled whether the pool may grow @return this builder */
        public Builder autoExpansion(boolean enabled) {
            enableAutoExpansion = enabled;
            return this;
        }

        /** @param bytes minimum block alignment, a power of two @return this builder */
        public Builder alignment(long bytes) {
            alignment = bytes;
            return this;
        }

        /** @param enabled whether to reserve the initial size at once @return this builder */
        public Builder preAllocate(boolean enabled) {
            preAllocate = enabled;
            return this;
        }

        /** @param enabled whether to keep statistics @return this builder */
        public Builder stats(boolean enabled) {
            enableStats = enabled;
            return this;
        }

        /**
         * @return the configuration
         * @throws InvalidMemoryRequestException if the values contradict each other (see the record)
         */
        public MemoryPoolConfig build() {
            return new MemoryPoolConfig(initialSize, maxSize, growthIncrement, enableAutoExpansion, alignment,
                    preAllocate, enableStats);
        }
    }
}
