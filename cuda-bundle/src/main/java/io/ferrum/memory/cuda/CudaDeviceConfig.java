package io.ferrum.memory.cuda;

import org.osgi.service.metatype.annotations.AttributeDefinition;
import org.osgi.service.metatype.annotations.ObjectClassDefinition;

/**
 * Configuration of the CUDA devices. The PID {@code io.ferrum.memory.cuda} gives every GPU its
 * settings; a factory configuration of {@code io.ferrum.memory.cuda.device} with {@code index=N}
 * gives {@code cuda:N} settings of its own. Sizes are in bytes.
 */
@ObjectClassDefinition(name = "Ferrum Memory CUDA device",
        description = "GPU memory (cuda:<index>) through JCuda's driver API, pooled.")
@interface CudaDeviceConfig {

    @AttributeDefinition(description = "For a factory configuration (io.ferrum.memory.cuda.device): the GPU it"
            + " configures, cuda:<index>, 0 or more and below the number of GPUs. Ignored by io.ferrum.memory.cuda,"
            + " which configures every GPU that has no factory configuration of its own.")
    int index() default 0;

    @AttributeDefinition(description = "Capacity in bytes this device may use (its totalBytes); 0 means the GPU's whole memory.")
    long capacity() default 0;

    @AttributeDefinition(description = "Initial pool size in bytes.")
    long initialSize() default 256L << 20;

    @AttributeDefinition(description = "Maximum pool size in bytes; 0 means unlimited.")
    long maxSize() default 0;

    @AttributeDefinition(description = "Bytes added when the pool grows.")
    long growthIncrement() default 256L << 20;

    @AttributeDefinition(description = "Whether the pool may grow beyond its initial size.")
    boolean autoExpansion() default true;

    @AttributeDefinition(description = "Minimum alignment of every block in bytes, a power of two.")
    long alignment() default 256;

    @AttributeDefinition(description = "Reserve the initial size at start instead of on first use.")
    boolean preAllocate() default false;

    @AttributeDefinition(description = "Keep access statistics and bandwidth figures.")
    boolean stats() default true;

    @AttributeDefinition(description = "Trim and compact automatically when growth fails, and once each time an allocation takes a pool's utilisation above gcThreshold.")
    boolean autoGc() default true;

    @AttributeDefinition(description = "Utilisation in [0, 1] above which auto-GC runs; 1 never.")
    double gcThreshold() default 0.85;

    @AttributeDefinition(description = "Record allocation sites; leaks found at stop are reported with them.")
    boolean debug() default false;

    @AttributeDefinition(description = "Asynchronous copies in flight at once.")
    int maxConcurrentTransfers() default 4;

    @AttributeDefinition(description = "Clearing between owners: none (fastest), on-allocate or on-free (cuMemsetD8).")
    String zeroing() default "none";

    @AttributeDefinition(description = "Bytes of freed blocks each platform thread may keep for its own next allocations; 0 turns thread caches off.")
    long threadCacheBytes() default 32L << 20;

    @AttributeDefinition(description = "Page-locked buffers in the staging ring that heap and pageable copies go through (2 to 64).")
    int stagingSlots() default 4;

    @AttributeDefinition(description = "Bytes per staging buffer, a multiple of 4096 from 64 KiB to 1 GiB.")
    long stagingSlotBytes() default 4L << 20;
}
