package io.ferrum.memory.cuda;

import static org.junit.jupiter.api.Assertions.assertSame;

import jcuda.driver.CUstream;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;

/** Which stream an upstream call is ordered on; a stream is handed only to its own device's upstream. */
class CurrentStreamTest {

    /**
     * Review defect: work on a cuda:0 stream that copies a cuda:1 block (a peer's, by alias) runs in
     * cuda:1's upstream, which was handed cuda:0's stream and recorded its own staging events on it:
     * the driver refuses an event and a stream of two contexts.
     */
    @Test
    void anotherDevicesUpstreamGetsItsOwnDefaultStream() {
        CUstream cuda0Stream = new CUstream();
        CurrentStream.run(Device.cuda(0), cuda0Stream, () -> {
            assertSame(cuda0Stream, CurrentStream.get(Device.cuda(0)));
            assertSame(CurrentStream.DEFAULT, CurrentStream.get(Device.cuda(1)));
        });
    }

    @Test
    void nestedWorkRestoresTheOuterStream() {
        CUstream outer = new CUstream();
        CUstream inner = new CUstream();
        assertSame(CurrentStream.DEFAULT, CurrentStream.get(Device.cuda(0)));
        CurrentStream.run(Device.cuda(0), outer, () -> {
            CurrentStream.run(Device.cuda(1), inner, () -> {
                assertSame(inner, CurrentStream.get(Device.cuda(1)));
                assertSame(CurrentStream.DEFAULT, CurrentStream.get(Device.cuda(0)));
            });
            assertSame(outer, CurrentStream.get(Device.cuda(0)));
        });
        assertSame(CurrentStream.DEFAULT, CurrentStream.get(Device.cuda(0)));
    }
}
