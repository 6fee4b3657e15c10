package io.ferrum.memory.monitor;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import io.ferrum.memory.api.AdvancedMemoryManager;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.InvalidHandleException;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryException;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryTransfer;
import io.ferrum.memory.api.StagingConflictException;
import io.ferrum.memory.pool.ArenaUpstream;
import io.ferrum.memory.pool.PoolSettings;
import io.ferrum.memory.pool.PooledMemoryManager;

/**
 * Ctrl-C in the shell interrupts the thread running {@code mem:copy}: a copy between two devices
 * stops before its next piece on every route, the first piece included, over real pooled managers
 * (host memory, and memory the CPU cannot address, whose views are staging copies).
 */
class CrossDeviceCopierTest {
    private static final long MiB = 1L << 20;
    private static final Device CPU1 = Device.cpu(1);
    private static final Device CPU2 = Device.cpu(2);
    private static final Device GPU1 = Device.cuda(1);
    private static final Device GPU2 = Device.cuda(2);

    /** The ways from one device to another: each takes its own route through the copier. */
    enum Route {
        HOST_TO_HOST(CPU1, CPU2, false), HOST_TO_DEVICE(CPU1, GPU1, false), DEVICE_TO_HOST(GPU1, CPU1, false),
        STAGED(GPU1, GPU2, false), PEER(GPU1, GPU2, true);

        final Device src;
        final Device dst;
        final boolean peers;

        Route(Device src, Device dst, boolean peers) {
            this.src = src;
            this.dst = dst;
            this.peers = peers;
        }
    }

    private final List<AutoCloseable> toClose = new ArrayList<>();
    private final Map<Device, PooledMemoryManager> running = new ConcurrentHashMap<>();

    @AfterEach
    void closeAll() throws Exception {
        Thread.interrupted();
        for (AutoCloseable c : toClose) {
            c.close();
        }
    }

    private PooledMemoryManager manager(Device d, boolean peers) {
        PoolSettings settings = peers ? PoolSettings.defaults().withPeers(running::get) : PoolSettings.defaults();
        PooledMemoryManager m = PooledMemoryManager.create(new ArenaUpstream(d, 64 * MiB, Device.CPU.equals(d.kind())),
                MemoryManagerConfig.defaults().withAutoGc(false, 0.85), settings, null);
        toClose.add(m);
        running.put(d, m);
        return m;
    }

    /**
     * @return {@code m} seen through a proxy that interrupts the calling thread once a call of it
     *         has moved bytes: a view given to a copy, a read, or a peer copy that was made (Ctrl-C
     *         during the first piece)
     */
    private static DeviceMemoryManager interruptingOnceBytesMoved(PooledMemoryManager m) {
        return (DeviceMemoryManager) Proxy.newProxyInstance(AdvancedMemoryManager.class.getClassLoader(),
                new Class<?>[] {AdvancedMemoryManager.class}, (proxy, method, args) -> {
                    Object answer;
                    try {
                        answer = method.invoke(m, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                    if (List.of("withMapped", "read").contains(method.getName())
                            || method.getName().equals("copyToPeer") && Boolean.TRUE.equals(answer)) {
                        Thread.currentThread().interrupt();
                    }
                    return answer;
                });
    }

    /**
     * @return {@code m} seen through a proxy that runs {@code then} once, as soon as the copy's first
     *         piece has arrived: after the outermost call that ends a piece returns (a view given to
     *         the copy, the write of the host buffer, a peer copy that was made). Both managers of a
     *         copy share {@code depth}, so a call nested in a view is not taken for the end of a piece.
     */
    private static DeviceMemoryManager afterFirstPiece(PooledMemoryManager m, int[] depth, AtomicBoolean fired,
                                                      Runnable then) {
        return (DeviceMemoryManager) Proxy.newProxyInstance(AdvancedMemoryManager.class.getClassLoader(),
                new Class<?>[] {AdvancedMemoryManager.class}, (proxy, method, args) -> {
                    Object answer;
                    depth[0]++;
                    try {
                        answer = method.invoke(m, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    } finally {
                        depth[0]--;
                    }
                    boolean endsPiece = List.of("withMapped", "write").contains(method.getName())
                            || method.getName().equals("copyToPeer") && Boolean.TRUE.equals(answer);
                    if (depth[0] == 0 && endsPiece && fired.compareAndSet(false, true)) {
                        then.run();
                    }
                    return answer;
                });
    }

    /** @return {@code data}'s first {@code piece} bytes at the start of {@code n} zeros */
    private static byte[] firstPieceOf(byte[] data, int n, long piece) {
        byte[] expected = new byte[n];
        System.arraycopy(data, 0, expected, 0, (int) piece);
        return expected;
    }

    private static byte[] contents(DeviceMemoryManager m, MemoryHandle h, int n) {
        byte[] back = new byte[n];
        m.read(h, 0, MemorySegment.ofArray(back));
        return back;
    }

    /**
     * A source block of {@code data.length} bytes filled with {@code data} and a destination block,
     * {@code dstSlack} bytes longer, holding zeros, each on a manager of its own: where the copies
     * below start.
     */
    private record Blocks(PooledMemoryManager src, PooledMemoryManager dst, MemoryHandle a, MemoryHandle b,
                          byte[] data) {
        /** @return the plan of copying {@code t}, each manager running {@code then} after the first piece */
        CrossDeviceCopier.Route planThenAfterFirstPiece(CrossDeviceCopier copier, MemoryTransfer t, Runnable then) {
            int[] depth = new int[1];
            AtomicBoolean fired = new AtomicBoolean();
            return copier.plan(t, afterFirstPiece(src, depth, fired, then), afterFirstPiece(dst, depth, fired, then));
        }
    }

    private Blocks blocks(Device from, Device to, boolean peers, int n, int dstSlack, long seed) {
        PooledMemoryManager src = manager(from, peers);
        PooledMemoryManager dst = manager(to, peers);
        byte[] data = new byte[n];
        new SplittableRandom(seed).nextBytes(data);
        MemoryHandle a = src.allocate(n, from);
        MemoryHandle b = dst.allocate(n + dstSlack, to);
        src.write(a, 0, MemorySegment.ofArray(data));
        return new Blocks(src, dst, a, b, data);
    }

    /**
     * An interrupt set before the copy: no byte moves, whatever the route. A copy from or into host
     * memory and a peer copy were one call that never looked at the interrupt, and the staged copy
     * looked only after its first piece, so each copied (all of it, or its first piece).
     */
    @ParameterizedTest
    @EnumSource(Route.class)
    void anInterruptSetBeforeACopyBetweenDevicesCopiesNothing(Route route) {
        MemoryMonitor mon = new MemoryMonitor(null, MonitorBuilder.config("", 0, 4), null);
        toClose.add(mon::deactivate);
        PooledMemoryManager src = manager(route.src, route.peers);
        PooledMemoryManager dst = manager(route.dst, route.peers);
        mon.addManager(src, Map.of(DeviceMemoryManager.DEVICE_PROPERTY, route.src.toString(), "service.ranking", 0,
                "service.id", 100L));
        mon.addManager(dst, Map.of(DeviceMemoryManager.DEVICE_PROPERTY, route.dst.toString(), "service.ranking", 0,
                "service.id", 101L));
        int n = 4096;
        MemoryHandle a = src.allocate(n, route.src);
        MemoryHandle b = dst.allocate(n, route.dst);
        byte[] sevens = new byte[n];
        Arrays.fill(sevens, (byte) 7);
        src.write(a, 0, MemorySegment.ofArray(sevens));

        Thread.currentThread().interrupt(); // Ctrl-C as the command starts
        MemoryException e;
        try {
            e = assertThrows(MemoryException.class, () -> mon.copy(MemoryTransfer.of(a, b, n)));
            assertTrue(Thread.currentThread().isInterrupted(), "the interrupt stays set");
        } finally {
            Thread.interrupted();
        }
        assertTrue(e.getCause() instanceof InterruptedException, "an interrupt, said as one: " + e.getCause());
        assertEquals("Copy of 4096 bytes from " + a + " on " + route.src + " to " + b + " on " + route.dst
                + " interrupted before its first byte: the destination is as it was", e.getMessage());
        assertArrayEquals(new byte[n], contents(dst, b, n), "no byte arrived");
    }

    /**
     * An interrupt during the first piece (pieces of 1 MiB here): the copy stops before the second,
     * and the destination holds exactly the bytes the message names, the rest as it was. A copy from
     * or into host memory and a peer copy went on to the end, as one call.
     */
    @ParameterizedTest
    @EnumSource(Route.class)
    void anInterruptDuringTheFirstPieceStopsTheCopyBeforeTheSecond(Route route) {
        int n = (int) (3 * MiB + 123); // four pieces
        Blocks x = blocks(route.src, route.dst, route.peers, n, 0, 5);
        PooledMemoryManager src = x.src();
        PooledMemoryManager dst = x.dst();
        MemoryHandle a = x.a();
        MemoryHandle b = x.b();
        CrossDeviceCopier copier = new CrossDeviceCopier(Runnable::run, MiB);
        MemoryTransfer t = MemoryTransfer.of(a, b, n);
        CrossDeviceCopier.Route r = copier.plan(t, interruptingOnceBytesMoved(src), dst);

        MemoryException e;
        try {
            e = assertThrows(MemoryException.class, () -> copier.copy(r, t));
            assertTrue(Thread.currentThread().isInterrupted(), "the interrupt stays set");
        } finally {
            Thread.interrupted();
        }
        assertTrue(e.getCause() instanceof InterruptedException, "an interrupt, said as one: " + e.getCause());
        assertEquals("Copy of " + n + " bytes from " + a + " on " + route.src + " to " + b + " on " + route.dst
                + " interrupted after 1048576 bytes: the destination holds part of the source (destination offsets 0"
                + " to 1048576), the rest of its range is as it was; copy again to complete it", e.getMessage());
        assertArrayEquals(firstPieceOf(x.data(), n, MiB), contents(dst, b, n), "the first piece arrived, no other");
    }

    /**
     * A copy whose destination offset is above its source's goes back to front (two handles of one
     * mapping may name one block): interrupted after its first piece, the destination holds the
     * range's last bytes, as the message says. The staged copy's first piece was the range's short
     * remainder at its end, while its message counted a whole piece and named offsets it had not
     * written.
     */
    @ParameterizedTest
    @EnumSource(Route.class)
    void anInterruptedCopyBackToFrontNamesTheLastBytesItCopied(Route route) {
        long piece = Math.min(MiB, CrossDeviceCopier.BOUNCE_BYTES);
        int n = (int) (2 * CrossDeviceCopier.BOUNCE_BYTES + 123); // not a whole number of pieces
        int at = 64;
        Blocks x = blocks(route.src, route.dst, route.peers, n, at, 9);
        PooledMemoryManager src = x.src();
        MemoryHandle a = x.a();
        MemoryHandle b = x.b();
        CrossDeviceCopier copier = new CrossDeviceCopier(Runnable::run, piece);
        MemoryTransfer t = MemoryTransfer.of(a, b, n).withDstOffset(at);
        CrossDeviceCopier.Route r = copier.plan(t, interruptingOnceBytesMoved(src), x.dst());

        MemoryException e;
        try {
            e = assertThrows(MemoryException.class, () -> copier.copy(r, t));
        } finally {
            Thread.interrupted();
        }
        long from = at + n - piece;
        assertTrue(e.getMessage().contains("interrupted after " + piece + " bytes: the destination holds part of the"
                + " source (destination offsets " + from + " to " + (at + n) + ")"), e.getMessage());
        byte[] expected = new byte[n + at];
        System.arraycopy(x.data(), (int) (n - piece), expected, (int) from, (int) piece);
        assertArrayEquals(expected, contents(x.dst(), b, n + at), "the range's last piece arrived, no other");
    }

    /**
     * The two handles of one mapping across two devices name one block: a copy between them whose
     * ranges overlap stays a memmove, forwards and backwards, when it goes in several pieces (1 MiB
     * here) on every route such a pair can take: a peer copy, from host memory, through the host buffer.
     */
    @ParameterizedTest(name = "{0}, peer copies {1}")
    @org.junit.jupiter.params.provider.CsvSource({"cpu, true", "cpu, false", "cuda, true", "cuda, false"})
    void anOverlappingCopyInSeveralPiecesBetweenTheTwoHandlesOfOneMappingIsAMemmove(String kind, boolean peerCopies) {
        Device d1 = Device.parse(kind + ":1");
        Device d2 = Device.parse(kind + ":2");
        PooledMemoryManager a = manager(d1, true);
        PooledMemoryManager b = manager(d2, true);
        DeviceMemoryManager from = peerCopies ? a : (DeviceMemoryManager) Proxy.newProxyInstance(
                AdvancedMemoryManager.class.getClassLoader(), new Class<?>[] {AdvancedMemoryManager.class},
                (proxy, method, args) -> {
                    if (method.getName().equals("copyToPeer")) {
                        return false;
                    }
                    try {
                        return method.invoke(a, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
        CrossDeviceCopier copier = new CrossDeviceCopier(Runnable::run, MiB);
        int n = (int) (3 * MiB + 4096 + 7); // four pieces
        int size = n + 2 * (int) MiB;
        for (long shift : new long[] {MiB / 2 + 5, -(MiB / 2 + 5)}) {
            io.ferrum.memory.api.MemoryMapping mapping = a.createMapping(d1, d2, size);
            byte[] before = new byte[size];
            new SplittableRandom(shift).nextBytes(before);
            a.write(mapping.source(), 0, MemorySegment.ofArray(before));
            long src = shift > 0 ? 0 : -shift;
            long dst = src + shift;
            MemoryTransfer t = MemoryTransfer.of(mapping.source(), mapping.target(), n).withSrcOffset(src).withDstOffset(dst);
            copier.copy(copier.plan(t, from, b), t);
            byte[] expected = before.clone();
            System.arraycopy(before, (int) src, expected, (int) dst, n);
            assertArrayEquals(expected, contents(b, mapping.target(), size), "shift " + shift);
            b.deallocate(mapping.target());
            a.deallocate(mapping.source());
        }
    }

    /**
     * The source freed after the first piece (pieces of 1 MiB): the next piece is refused, and the
     * copy's exception, still an {@link InvalidHandleException} naming the source, says which part
     * of the destination holds the source's bytes, as an interrupt's does, with the manager's refusal
     * as its cause. It used to be the manager's refusal itself, which says nothing of the piece that
     * had arrived.
     */
    @ParameterizedTest
    @EnumSource(Route.class)
    void aSourceFreedAfterTheFirstPieceFailsTheCopySayingWhatArrived(Route route) {
        int n = (int) (3 * MiB + 123); // four pieces
        Blocks x = blocks(route.src, route.dst, route.peers, n, 0, 13);
        MemoryHandle a = x.a();
        MemoryHandle b = x.b();
        CrossDeviceCopier copier = new CrossDeviceCopier(Runnable::run, MiB);
        MemoryTransfer t = MemoryTransfer.of(a, b, n);
        CrossDeviceCopier.Route r = x.planThenAfterFirstPiece(copier, t, () -> x.src().deallocate(a));

        InvalidHandleException e = assertThrows(InvalidHandleException.class, () -> copier.copy(r, t));

        assertEquals(a, e.handle());
        assertTrue(e.getCause() instanceof InvalidHandleException, "the manager's refusal: " + e.getCause());
        assertEquals("Copy of " + n + " bytes from " + a + " on " + route.src + " to " + b + " on " + route.dst
                + " failed after 1048576 bytes: the destination holds part of the source (destination offsets 0 to"
                + " 1048576), the rest of its range is as it was; copy again to complete it. Its next piece was"
                + " refused: " + e.getCause().getMessage(), e.getMessage());
        assertArrayEquals(firstPieceOf(x.data(), n, MiB), contents(x.dst(), b, n), "the first piece arrived, no other");
    }

    /**
     * The destination mapped through a host staging copy after the first piece: the copy's exception
     * stays a {@link StagingConflictException} naming the destination (a caller unmaps, then copies
     * again), and says that the first piece arrived; the manager's "Nothing was done" is its cause's.
     */
    @ParameterizedTest
    @EnumSource(value = Route.class, names = {"HOST_TO_DEVICE", "STAGED", "PEER"})
    void aDestinationMappedAfterTheFirstPieceFailsTheCopySayingWhatArrived(Route route) {
        int n = (int) (3 * MiB + 123);
        Blocks x = blocks(route.src, route.dst, route.peers, n, 0, 17);
        PooledMemoryManager dst = x.dst();
        MemoryHandle a = x.a();
        MemoryHandle b = x.b();
        CrossDeviceCopier copier = new CrossDeviceCopier(Runnable::run, MiB);
        MemoryTransfer t = MemoryTransfer.of(a, b, n);
        CrossDeviceCopier.Route r = x.planThenAfterFirstPiece(copier, t, () -> dst.mapMemory(b, MemoryAccess.READ_ONLY));

        StagingConflictException e = assertThrows(StagingConflictException.class, () -> copier.copy(r, t));

        assertEquals(b, e.handle());
        assertTrue(e.getCause() instanceof StagingConflictException, "the manager's refusal: " + e.getCause());
        assertTrue(e.getMessage().startsWith("Copy of " + n + " bytes from " + a + " on " + route.src + " to " + b
                + " on " + route.dst + " failed after 1048576 bytes: the destination holds part of the source"
                + " (destination offsets 0 to 1048576), the rest of its range is as it was; copy again to complete"
                + " it. Its next piece was refused: Block " + b), e.getMessage());
        dst.unmapMemory(b);
        assertArrayEquals(firstPieceOf(x.data(), n, MiB), contents(dst, b, n), "the first piece arrived, no other");
    }

    /**
     * A device that fails the second piece (not a refusal: the piece may have been written in part):
     * the copy's exception names both the destination offsets that hold the source and those of the
     * failed piece, which may hold some of it. A failure of the first piece is the manager's own
     * exception, unchanged.
     */
    @org.junit.jupiter.api.Test
    void aDeviceFailureAfterTheFirstPieceNamesThePieceItMayHaveWrittenInPart() {
        int n = (int) (3 * MiB + 123);
        Blocks x = blocks(GPU1, GPU2, false, n, 0, 19);
        PooledMemoryManager src = x.src();
        PooledMemoryManager dst = x.dst();
        MemoryHandle a = x.a();
        MemoryHandle b = x.b();
        CrossDeviceCopier copier = new CrossDeviceCopier(Runnable::run, MiB);
        MemoryTransfer t = MemoryTransfer.of(a, b, n);
        int[] writes = new int[1];
        MemoryException deviceError = new MemoryException("cuMemcpyHtoD failed on cuda:2: CUDA_ERROR_UNKNOWN");
        int failAt = 2;
        DeviceMemoryManager failing = (DeviceMemoryManager) Proxy.newProxyInstance(
                AdvancedMemoryManager.class.getClassLoader(), new Class<?>[] {AdvancedMemoryManager.class},
                (proxy, method, args) -> {
                    if (method.getName().equals("write") && ++writes[0] == failAt) {
                        throw deviceError;
                    }
                    try {
                        return method.invoke(dst, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                });

        MemoryException e = assertThrows(MemoryException.class, () -> copier.copy(copier.plan(t, src, failing), t));

        assertEquals(MemoryException.class, e.getClass());
        assertEquals(deviceError, e.getCause());
        assertEquals("Copy of " + n + " bytes from " + a + " on cuda:1 to " + b + " on cuda:2 failed after 1048576"
                + " bytes: the destination holds part of the source (destination offsets 0 to 1048576), its offsets"
                + " 1048576 to 2097152, where the failed piece went, may hold some of it, and the rest of its range"
                + " is as it was; copy again to complete it. Its next piece failed: " + deviceError.getMessage(),
                e.getMessage());

        writes[0] = failAt - 1; // the next copy fails at its first piece
        assertEquals(deviceError, assertThrows(MemoryException.class, () -> copier.copy(copier.plan(t, src, failing), t)),
                "a failure of the first piece is the manager's own exception");
    }

    /**
     * {@code copyAsync} between two devices runs on a worker: the stage fails with the same exception
     * as the synchronous copy, its type and its account of what arrived.
     */
    @org.junit.jupiter.api.Test
    void anAsynchronousCopyFailingAfterItsFirstPieceSaysWhatArrived() throws Exception {
        int n = (int) (3 * MiB + 123);
        Blocks x = blocks(CPU1, GPU1, false, n, 0, 23);
        PooledMemoryManager dst = x.dst();
        MemoryHandle a = x.a();
        MemoryHandle b = x.b();
        ExecutorService worker = Executors.newSingleThreadExecutor();
        toClose.add(worker::shutdownNow);
        CrossDeviceCopier copier = new CrossDeviceCopier(worker, MiB);
        MemoryTransfer t = MemoryTransfer.of(a, b, n);
        CrossDeviceCopier.Route r = x.planThenAfterFirstPiece(copier, t, () -> dst.mapMemory(b, MemoryAccess.READ_ONLY));

        CompletionException stage = assertThrows(CompletionException.class,
                () -> copier.copyAsync(r, t, null).toCompletableFuture().orTimeout(30, TimeUnit.SECONDS).join());

        StagingConflictException e = assertInstanceOf(StagingConflictException.class, stage.getCause());
        assertEquals(b, e.handle());
        assertTrue(e.getMessage().contains(" failed after 1048576 bytes: the destination holds part of the source"
                + " (destination offsets 0 to 1048576)"), e.getMessage());
        dst.unmapMemory(b);
        assertArrayEquals(firstPieceOf(x.data(), n, MiB), contents(dst, b, n), "the first piece arrived, no other");
    }
}
