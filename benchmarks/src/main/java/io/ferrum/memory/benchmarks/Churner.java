package io.ferrum.memory.benchmarks;

import java.lang.foreign.MemorySegment;

import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;

import io.ferrum.memory.api.AdvancedMemoryManager;
import io.ferrum.memory.api.AllocationRequirements;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryRouter;
import io.ferrum.memory.monitor.MonitorBuilder;
import io.netty.buffer.AdaptiveByteBufAllocator;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.PooledByteBufAllocator;

/**
 * One contender seen as three steps on an opaque buffer, for the workloads whose steps run on
 * different threads (the cross-thread pipeline, the virtual threads): allocate, touch one byte per
 * 4 KiB page ({@link AllocTouchBenchmark#touch}), free. Each benchmark fork builds one kind, so
 * every call site sees a single implementation.
 */
abstract class Churner implements AutoCloseable {

    /** @return a new buffer of {@code size} bytes */
    abstract Object allocate(long size);

    /** Writes one byte per page of {@code buffer}, of {@code size} bytes. */
    abstract void touch(Object buffer, long size);

    /** Frees {@code buffer}, from any thread. */
    abstract void free(Object buffer);

    @Override
    public void close() {
    }

    /** @param name ferrumDirect, ferrumRouted, nettyAdaptive, nettyPooled, arrowUnsafe or malloc */
    static Churner of(String name) {
        return switch (name) {
            case "ferrumDirect" -> new Ferrum(Contenders.ferrum(true), null);
            case "ferrumRouted" -> {
                AdvancedMemoryManager m = Contenders.ferrum(true);
                yield new Ferrum(m, Contenders.router(m));
            }
            case "nettyAdaptive" -> new Netty(new AdaptiveByteBufAllocator(true, true)::directBuffer);
            case "nettyPooled" -> new Netty(Contenders.nettyPooled()::directBuffer);
            case "arrowUnsafe" -> new Arrow(new RootAllocator(Long.MAX_VALUE));
            case "malloc" -> new Malloc();
            default -> throw new IllegalArgumentException("no contender " + name);
        };
    }

    /** Ferrum, direct or through a router; the touch goes through {@code withMapped}. */
    static final class Ferrum extends Churner {
        private static final AllocationRequirements ANY = AllocationRequirements.defaults();
        final AdvancedMemoryManager manager;
        final MonitorBuilder.Standalone routing;
        final MemoryRouter router;

        Ferrum(AdvancedMemoryManager manager, MonitorBuilder.Standalone routing) {
            this.manager = manager;
            this.routing = routing;
            this.router = routing == null ? null : routing.router();
        }

        @Override
        Object allocate(long size) {
            return router != null ? router.allocate(size, ANY) : manager.allocate(size, Contenders.CPU);
        }

        @Override
        void touch(Object buffer, long size) {
            manager.withMapped((MemoryHandle) buffer, MemoryAccess.WRITE_ONLY, AllocTouchBenchmark.TOUCH);
        }

        @Override
        void free(Object buffer) {
            if (router != null) {
                router.deallocate((MemoryHandle) buffer);
            } else {
                manager.deallocate((MemoryHandle) buffer);
            }
        }

        @Override
        public void close() {
            if (routing != null) {
                routing.close();
            }
            manager.close();
        }
    }

    /** Netty's direct buffers (adaptive or pooled). */
    static final class Netty extends Churner {
        interface Alloc {
            ByteBuf directBuffer(int size);
        }

        final Alloc alloc;

        Netty(Alloc alloc) {
            this.alloc = alloc;
        }

        @Override
        Object allocate(long size) {
            return alloc.directBuffer((int) size);
        }

        @Override
        void touch(Object buffer, long size) {
            AllocTouchBenchmark.touch((ByteBuf) buffer, (int) size);
        }

        @Override
        void free(Object buffer) {
            ((ByteBuf) buffer).release();
        }
    }

    /** Arrow's root allocator with the Unsafe allocation manager. */
    static final class Arrow extends Churner {
        final BufferAllocator allocator;

        Arrow(BufferAllocator allocator) {
            this.allocator = allocator;
        }

        @Override
        Object allocate(long size) {
            return allocator.buffer(size);
        }

        @Override
        void touch(Object buffer, long size) {
            AllocTouchBenchmark.touch((ArrowBuf) buffer, size);
        }

        @Override
        void free(Object buffer) {
            ((ArrowBuf) buffer).close();
        }

        @Override
        public void close() {
            allocator.close();
        }
    }

    /** {@code malloc}/{@code free} through FFM downcalls: the floor. */
    static final class Malloc extends Churner {
        @Override
        Object allocate(long size) {
            return Contenders.malloc(size);
        }

        @Override
        void touch(Object buffer, long size) {
            AllocTouchBenchmark.touch(((MemorySegment) buffer).address(), size);
        }

        @Override
        void free(Object buffer) {
            Contenders.free((MemorySegment) buffer);
        }
    }
}
