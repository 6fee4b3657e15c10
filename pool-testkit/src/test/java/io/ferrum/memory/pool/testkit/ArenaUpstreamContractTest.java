package io.ferrum.memory.pool.testkit;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.pool.ArenaUpstream;
import io.ferrum.memory.pool.DeviceUpstream;

/** The upstream suite against the pool's own test upstream, host-addressable: the suite checks itself. */
class ArenaUpstreamContractTest extends DeviceUpstreamContract {
    @Override
    protected DeviceUpstream createUpstream() {
        return new ArenaUpstream(Device.cpu(9), 256L << 20, true);
    }
}
