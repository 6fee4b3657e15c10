package io.ferrum.memory.pool.testkit;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.pool.ArenaUpstream;
import io.ferrum.memory.pool.DeviceUpstream;

/** The upstream suite against a test upstream that hides its memory from the CPU, as a GPU would. */
class StagedArenaUpstreamContractTest extends DeviceUpstreamContract {
    @Override
    protected DeviceUpstream createUpstream() {
        return new ArenaUpstream(Device.cpu(9), 256L << 20, false);
    }
}
