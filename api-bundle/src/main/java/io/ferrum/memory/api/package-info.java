/**
 * The Ferrum Memory contract: device memory managers, stream managers, factories, the global
 * monitor, the allocation router, allocation strategies and memory observers, with the value types
 * and the exception hierarchy they share.
 *
 * <p>This package holds interfaces, records, enums and exceptions only. Implementations live in
 * the pool, backend, monitor and strategy bundles and are found as OSGi services.
 *
 * <h2>Units and conventions</h2>
 * <ul>
 *   <li>Every size, offset and alignment is a {@code long} count of bytes.</li>
 *   <li>Every exception thrown by a method of this package is an unchecked {@link
 *       io.ferrum.memory.api.MemoryException}; value types validate at construction and throw
 *       {@link io.ferrum.memory.api.InvalidMemoryRequestException} for values that make no sense.</li>
 *   <li>Value types are immutable and safe to share between threads.</li>
 * </ul>
 */
@org.osgi.annotation.bundle.Export
@org.osgi.annotation.versioning.Version("1.5.0")
package io.ferrum.memory.api;
