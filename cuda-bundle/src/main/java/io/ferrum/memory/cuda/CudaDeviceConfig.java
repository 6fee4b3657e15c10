package io.ferrum.memory.cuda;

import org.osgi.service.metatype.annotations.AttributeDefinition;
import org.osgi.service.metatype.annotations.AttributeType;
import org.osgi.service.metatype.annotations.ObjectClassDefinition;

/**
 * Configuration of the CUDA devices. The PID {@code io.ferrum.memory.cuda} gives every GPU its
 * settings; a factory configuration of {@code io.ferrum.memory.cuda.device} with {@code index=N}
 * gives {@code cuda:N} settings of its own. Sizes are in bytes.
 *
 * <p>Flags and numbers are {@code String} attributes, typed for Metatype only: DS's own conversion
 * would turn {@code autoExpansion=yes} into {@code false} silently and fail {@code capacity=abc} with
 * a stack trace. {@link CudaDeviceConfigs#refusal} reads them with {@link
 * io.ferrum.memory.pool.ConfigurationCheck} (flags: true, yes, on, false, no, off; a Config Admin
 * user's {@code Boolean}, {@code Integer}, {@code Long} or {@code Double} arrives as its text).
 */
@ObjectClassDefinition(name = "Ferrum Memory CUDA device",
        description = "GPU memory (cuda:<index>) through JCuda's driver API, pooled.")
@interface CudaDeviceConfig {

    @AttributeDefinition(type = AttributeType.INTEGER, description = "For a factory configuration (io.ferrum.memory.cuda.device): the GPU it"
            + " configures, cuda:<index>, 0 or more and below the number of GPUs. Ignored by io.ferrum.memory.cuda,"
            + " which configures every GPU that has no factory configuration of its own.")
    String index() default "0";

    @AttributeDefinition(type = AttributeType.LONG, description = "Capacity in bytes this device may use (its totalBytes); 0 means the GPU's whole memory.")
    String capacity() default "0";

    @AttributeDefinition(type = AttributeType.LONG, description = "Initial pool size in bytes.")
    String initialSize() default "268435456";

    @AttributeDefinition(type = AttributeType.LONG, description = "Maximum pool size in bytes; 0 means unlimited.")
    String maxSize() default "0";

    @AttributeDefinition(type = AttributeType.LONG, description = "Bytes added when the pool grows.")
    String growthIncrement() default "268435456";

    @AttributeDefinition(type = AttributeType.BOOLEAN, description = "Whether the pool may grow beyond its initial size.")
    String autoExpansion() default "true";

    @AttributeDefinition(type = AttributeType.LONG, description = "Minimum alignment of every block in bytes, a power of two.")
    String alignment() default "256";

    @AttributeDefinition(type = AttributeType.BOOLEAN, description = "Reserve the initial size at start instead of on first use.")
    String preAllocate() default "false";

    @AttributeDefinition(type = AttributeType.BOOLEAN, description = "Keep access statistics and bandwidth figures.")
    String stats() default "true";

    @AttributeDefinition(type = AttributeType.BOOLEAN, description = "Trim and compact automatically when growth fails, and once each time an allocation takes a pool's utilisation above gcThreshold.")
    String autoGc() default "true";

    @AttributeDefinition(type = AttributeType.DOUBLE, description = "Utilisation in [0, 1] above which auto-GC runs; 1 never.")
    String gcThreshold() default "0.85";

    @AttributeDefinition(type = AttributeType.BOOLEAN, description = "Record allocation sites; leaks found at stop are reported with them.")
    String debug() default "false";

    @AttributeDefinition(type = AttributeType.INTEGER, description = "Asynchronous copies in flight at once.")
    String maxConcurrentTransfers() default "4";

    @AttributeDefinition(description = "Clearing between owners: none (fastest), on-allocate or on-free (cuMemsetD8).")
    String zeroing() default "none";

    @AttributeDefinition(type = AttributeType.LONG, description = "Bytes of freed blocks each platform thread may keep for its own next allocations; 0 turns thread caches off.")
    String threadCacheBytes() default "33554432";

    @AttributeDefinition(type = AttributeType.INTEGER, description = "Page-locked buffers in the staging ring that heap and pageable copies go through (2 to 64).")
    String stagingSlots() default "4";

    @AttributeDefinition(type = AttributeType.LONG, description = "Bytes per staging buffer, a multiple of 4096 from 64 KiB to 1 GiB.")
    String stagingSlotBytes() default "4194304";
}
