package io.ferrum.memory.cuda;

import java.util.concurrent.ConcurrentHashMap;

import jcuda.driver.CUresult;
import jcuda.driver.JCudaDriver;

import io.ferrum.memory.api.Device;

/**
 * Peer access from one GPU's context to the others', asked for once per peer context, the first time
 * a copy of this upstream touches that peer's memory. A copy between two GPUs works without it (the
 * driver stages it through host memory); with it the copy goes over the peer link (NVLink or PCIe)
 * directly. So nothing here fails a copy: a pair the hardware cannot link, a full peer table ({@code
 * CUDA_ERROR_TOO_MANY_PEERS}) or any other refusal leaves the copy to the driver's staged path, and
 * is not asked again for that context.
 *
 * <p>Peer access belongs to a context: when a peer's primary context is destroyed (its last retain
 * released, say on a restart) and created again, the access is gone. A peer's context is known by the
 * {@link PrimaryContext} retain its upstream holds, which a restart replaces, so the new one is asked
 * again; only the last one per device is kept.
 *
 * @param <C> a context retain: {@link PrimaryContext}, or in tests anything a fake driver knows
 */
final class PeerAccess<C> {

    /**
     * The driver calls, behind an interface so that tests can answer them without a GPU.
     *
     * @param <C> the context retain
     */
    interface Driver<C> {
        /** @return the device whose context {@code context} is */
        Device device(C context);

        /** @return whether {@code self}'s device can address {@code peer}'s memory directly */
        boolean canAccess(C self, C peer);

        /** @return the result of enabling access to {@code peer}'s context from {@code self}'s */
        int enable(C self, C peer);
    }

    /** The driver itself. */
    static final Driver<PrimaryContext> DRIVER = new Driver<>() {
        @Override
        public Device device(PrimaryContext context) {
            return context.device();
        }

        @Override
        public boolean canAccess(PrimaryContext self, PrimaryContext peer) {
            int[] can = new int[1];
            int rc = Cu.rc(() -> JCudaDriver.cuDeviceCanAccessPeer(can, self.cuDevice(), peer.cuDevice()));
            return rc == CUresult.CUDA_SUCCESS && can[0] != 0;
        }

        @Override
        public int enable(PrimaryContext self, PrimaryContext peer) {
            self.makeCurrent();
            // "Already enabled" (another thread asked first) is a result, not a failure, also where
            // JCuda's exceptions are on.
            return Cu.rc(() -> JCudaDriver.cuCtxEnablePeerAccess(peer.context(), 0));
        }
    };

    /** The outcome for one peer context. */
    enum Link {
        /** Copies go over the peer link. */
        DIRECT,
        /** The driver stages copies through host memory: the hardware has no link, or enabling failed. */
        STAGED
    }

    private record Known<C>(C context, Link link) {
    }

    private final C self;
    private final Driver<C> driver;
    private final ConcurrentHashMap<Device, Known<C>> known = new ConcurrentHashMap<>();

    /**
     * @param self   the context copies are issued in
     * @param driver the driver calls
     */
    PeerAccess(C self, Driver<C> driver) {
        this.self = self;
        this.driver = driver;
    }

    /**
     * Asks for access to {@code peer}'s context unless it was asked for already; the copy that calls
     * this holds a block of the peer, so the peer's retain is live. Two threads may both ask the
     * first time: the driver answers the second "already enabled", which counts as done.
     *
     * @param peer the context of the memory a copy touches; one of this device (or null): nothing to do
     * @return how copies to and from that context go
     */
    Link ensure(C peer) {
        if (peer == null || peer == self) {
            return Link.DIRECT;
        }
        Device device = driver.device(peer);
        if (device.equals(driver.device(self))) {
            return Link.DIRECT;
        }
        Known<C> k = known.get(device);
        if (k != null && k.context() == peer) {
            return k.link();
        }
        Link link = Link.STAGED;
        if (driver.canAccess(self, peer)) {
            int rc = driver.enable(self, peer);
            if (rc == CUresult.CUDA_SUCCESS || rc == CUresult.CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) {
                link = Link.DIRECT;
            }
        }
        known.put(device, new Known<>(peer, link));
        return link;
    }
}
