package io.ferrum.memory.cpu;

import java.util.concurrent.atomic.AtomicLong;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.pool.DeviceUpstream;
import io.ferrum.memory.pool.testkit.DeviceUpstreamContract;

/** The CPU backend's upstream keeps every promise of {@link DeviceUpstream}. */
class FfmUpstreamContractTest extends DeviceUpstreamContract {
    @Override
    protected DeviceUpstream createUpstream() {
        return new FfmUpstream(Device.cpu(5), 0, new AtomicLong());
    }
}
