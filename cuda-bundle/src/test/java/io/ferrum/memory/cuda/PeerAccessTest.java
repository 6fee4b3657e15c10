package io.ferrum.memory.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;

import org.junit.jupiter.api.Test;

import jcuda.driver.CUresult;

import io.ferrum.memory.api.Device;

/**
 * {@link PeerAccess} over a fake driver: access to a peer's context is asked for once per context
 * retain, counts as done when the driver says it already is, and a pair without a link or a refusal
 * leaves copies staged without failing them.
 */
class PeerAccessTest {

    /** A context retain: its device and a name telling two retains of one device apart. */
    private record Ctx(Device device, String name) {
    }

    /** Answers from {@code links} (pairs "i>j" that can access) and {@code enableResult}; records the calls. */
    private static final class FakeDriver implements PeerAccess.Driver<Ctx> {
        final List<String> calls = new CopyOnWriteArrayList<>();
        final Set<String> links;
        int enableResult = CUresult.CUDA_SUCCESS;

        FakeDriver(Set<String> links) {
            this.links = links;
        }

        @Override
        public Device device(Ctx context) {
            return context.device();
        }

        @Override
        public boolean canAccess(Ctx self, Ctx peer) {
            calls.add("can " + self.name() + ">" + peer.name());
            return links.contains(self.device().index() + ">" + peer.device().index());
        }

        @Override
        public int enable(Ctx self, Ctx peer) {
            calls.add("enable " + self.name() + ">" + peer.name());
            return enableResult;
        }
    }

    private static final Ctx GPU0 = new Ctx(Device.cuda(0), "0");
    private static final Ctx GPU1 = new Ctx(Device.cuda(1), "1");
    private static final Ctx GPU2 = new Ctx(Device.cuda(2), "2");

    @Test
    void aLinkedPeerIsEnabledOnceAndItsOwnContextNeverAsked() {
        FakeDriver driver = new FakeDriver(Set.of("0>1"));
        PeerAccess<Ctx> access = new PeerAccess<>(GPU0, driver);
        assertEquals(PeerAccess.Link.DIRECT, access.ensure(GPU0));
        assertEquals(PeerAccess.Link.DIRECT, access.ensure(new Ctx(Device.cuda(0), "0 again")), "the same device");
        assertEquals(PeerAccess.Link.DIRECT, access.ensure(null));
        assertEquals(List.of(), driver.calls);

        assertEquals(PeerAccess.Link.DIRECT, access.ensure(GPU1));
        assertEquals(PeerAccess.Link.DIRECT, access.ensure(GPU1));
        assertEquals(List.of("can 0>1", "enable 0>1"), driver.calls, "asked once");
    }

    @Test
    void aPairWithoutALinkIsStagedAndNotAskedAgain() {
        FakeDriver driver = new FakeDriver(Set.of("0>1"));
        PeerAccess<Ctx> access = new PeerAccess<>(GPU0, driver);
        assertEquals(PeerAccess.Link.STAGED, access.ensure(GPU2));
        assertEquals(PeerAccess.Link.STAGED, access.ensure(GPU2));
        assertEquals(List.of("can 0>2"), driver.calls, "never enabled, asked once");
    }

    @Test
    void alreadyEnabledCountsAsDoneAndARefusalLeavesTheCopyStaged() {
        FakeDriver driver = new FakeDriver(Set.of("0>1", "0>2"));
        PeerAccess<Ctx> access = new PeerAccess<>(GPU0, driver);
        driver.enableResult = CUresult.CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED; // another thread, or another retain
        assertEquals(PeerAccess.Link.DIRECT, access.ensure(GPU1));
        driver.enableResult = CUresult.CUDA_ERROR_TOO_MANY_PEERS;
        assertEquals(PeerAccess.Link.STAGED, access.ensure(GPU2));
        assertEquals(PeerAccess.Link.STAGED, access.ensure(GPU2));
        assertEquals(List.of("can 0>1", "enable 0>1", "can 0>2", "enable 0>2"), driver.calls);
    }

    /** A peer's restart brings a new retain of a context made anew, which has no access yet. */
    @Test
    void aNewRetainOfAPeerIsAskedAgain() {
        FakeDriver driver = new FakeDriver(Set.of("0>1"));
        PeerAccess<Ctx> access = new PeerAccess<>(GPU0, driver);
        access.ensure(GPU1);
        Ctx restarted = new Ctx(Device.cuda(1), "1 restarted");
        assertEquals(PeerAccess.Link.DIRECT, access.ensure(restarted));
        assertEquals(PeerAccess.Link.DIRECT, access.ensure(restarted));
        assertEquals(List.of("can 0>1", "enable 0>1", "can 0>1 restarted", "enable 0>1 restarted"), driver.calls);
    }
}
