/**
 * The pool engine's SPI for device backend authors: implement {@link
 * io.ferrum.memory.pool.DeviceUpstream} (reserve and release large chunks, copy and fill bytes,
 * device facts) and wrap it in a {@link io.ferrum.memory.pool.PooledMemoryManager}, which supplies
 * handles, sub-allocation, alignment, growth, limits, statistics, fragmentation, compaction,
 * mapping and pressure. A backend supplies its streams as a {@link
 * io.ferrum.memory.pool.StreamExecutor}; {@link io.ferrum.memory.pool.HostStreamManager} is the one
 * that runs ordered streams on host threads for devices whose copies are driven from the host.
 * {@link io.ferrum.memory.pool.BundleClasses} defines every class of a backend's bundle before its
 * managers serve, and has its loader load every class it imports from another bundle (2.6: on
 * Equinox a class of a bundle being uninstalled cannot be loaded). {@link
 * io.ferrum.memory.pool.PooledMemoryManager#configurePools} applies an edited configuration's pools
 * to a running manager, all or none (2.7). {@link io.ferrum.memory.pool.ConfigurationCheck#integer(String,
 * Object, int)} names a signed value with the attribute's own lower bound (2.8).
 */
@org.osgi.annotation.bundle.Export
@org.osgi.annotation.versioning.Version("2.8.0")
package io.ferrum.memory.pool;
