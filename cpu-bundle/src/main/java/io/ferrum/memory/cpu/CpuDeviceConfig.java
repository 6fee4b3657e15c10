package io.ferrum.memory.cpu;

import org.osgi.service.metatype.annotations.AttributeDefinition;
import org.osgi.service.metatype.annotations.AttributeType;
import org.osgi.service.metatype.annotations.ObjectClassDefinition;

/**
 * Configuration of one logical host device. {@code io.ferrum.memory.cpu} configures {@code cpu:0};
 * each factory configuration of {@code io.ferrum.memory.cpu.device} adds a {@code cpu:<index>}
 * (for tenants, NUMA nodes or tests of multi-device strategies). Sizes are bytes with an optional
 * binary unit ({@code 4096}, {@code 64k}, {@code 256m}, {@code 2GiB}), read by {@link ConfigSizes}.
 *
 * <p>Flags and numbers are {@code String} attributes, typed for Metatype only: DS's own conversion
 * would turn {@code autoExpansion=yes} into {@code false} silently and fail {@code index=abc} with a
 * stack trace. {@link CpuDevice#refusal} reads them with {@link
 * io.ferrum.memory.pool.ConfigurationCheck} (flags: true, yes, on, false, no, off; a Config Admin
 * user's {@code Boolean}, {@code Integer} or {@code Double} arrives as its text).
 */
@ObjectClassDefinition(name = "Ferrum Memory CPU device",
        description = "A logical host-memory device (cpu:<index>) served through Java's FFM API.")
@interface CpuDeviceConfig {

    @AttributeDefinition(type = AttributeType.INTEGER, description = "Device index: the device is cpu:<index>. The PID io.ferrum.memory.cpu configures"
            + " cpu:0 only and refuses any other index; factory configurations (io.ferrum.memory.cpu.device) need 1 or more."
            + " A refused configuration is logged as an error and changes nothing.")
    String index() default "0";

    @AttributeDefinition(description = "Capacity this device may use (its totalBytes), in bytes or with a binary unit"
            + " (256m, 8g); 0 means all physical RAM.")
    String capacity() default "0";

    @AttributeDefinition(description = "Initial pool size in bytes: each memory type's pool reserves a first chunk of this"
            + " size on first use (default 2 MiB, so that a device with a small block of each of its seven types reserves"
            + " 14 MiB, not seven times a large size).")
    String initialSize() default "2m";

    @AttributeDefinition(description = "Maximum pool size; 0 means unlimited.")
    String maxSize() default "0";

    @AttributeDefinition(description = "Bytes added when the pool grows (default 64 MiB; a request of a quarter of it or"
            + " more gets a chunk of its own size, so reserved stays within one increment of used per pool).")
    String growthIncrement() default "64m";

    @AttributeDefinition(type = AttributeType.BOOLEAN, description = "Whether the pool may grow beyond its initial size.")
    String autoExpansion() default "true";

    @AttributeDefinition(description = "Minimum alignment of every block in bytes, a power of two.")
    String alignment() default "256";

    @AttributeDefinition(type = AttributeType.BOOLEAN, description = "Reserve the initial size at start instead of on first use.")
    String preAllocate() default "false";

    @AttributeDefinition(type = AttributeType.BOOLEAN, description = "Keep access statistics and bandwidth figures.")
    String stats() default "true";

    @AttributeDefinition(type = AttributeType.BOOLEAN, description = "Trim and compact automatically when growth fails, and once each time an allocation takes a pool's utilisation above gcThreshold.")
    String autoGc() default "true";

    @AttributeDefinition(type = AttributeType.DOUBLE, description = "Utilisation in [0, 1] (used over the pool's maxSize, or over the device) above which auto-GC runs; 1 never.")
    String gcThreshold() default "0.85";

    @AttributeDefinition(type = AttributeType.BOOLEAN, description = "Record allocation sites; leaks found at stop are reported with them.")
    String debug() default "false";

    @AttributeDefinition(type = AttributeType.INTEGER, description = "Asynchronous copies in flight at once.")
    String maxConcurrentTransfers() default "4";

    @AttributeDefinition(description = "Clearing between owners: none (fastest), on-allocate (new blocks read as zeros)"
            + " or on-free (freed data does not linger).")
    String zeroing() default "none";

    @AttributeDefinition(description = "Bytes of freed blocks each platform thread may keep for its own next allocations,"
            + " without taking a pool lock (a quarter for blocks up to 256 KiB; blocks up to 4 MiB only while other"
            + " threads allocate on the same device too); reported as free and given back on trim, defragment and before an allocation fails."
            + " 0 turns thread caches off.")
    String threadCacheBytes() default "32m";
}
