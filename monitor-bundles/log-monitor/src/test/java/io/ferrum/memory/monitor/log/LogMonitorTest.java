package io.ferrum.memory.monitor.log;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.lang.reflect.Proxy;
import java.util.List;
import java.util.OptionalDouble;
import java.util.concurrent.CopyOnWriteArrayList;

import org.junit.jupiter.api.Test;
import org.osgi.service.log.Logger;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryPressure;

/** What the log monitor writes for a pressure change. */
class LogMonitorTest {
    /** @return a logger that keeps each info and warn message as "LEVEL message" */
    private static Logger into(List<String> lines) {
        return (Logger) Proxy.newProxyInstance(LogMonitorTest.class.getClassLoader(), new Class<?>[] {Logger.class},
                (proxy, method, args) -> {
                    if (args != null && args.length == 1 && args[0] instanceof String s) {
                        lines.add(method.getName() + " " + s);
                    }
                    return null;
                });
    }

    /**
     * A drop from HIGH to MEDIUM at 84.97 % used was logged as "85.0 % used", the threshold of HIGH
     * (rounded to one decimal): a line whose level and figure contradict each other. The figure is
     * rounded down now.
     */
    @Test
    void aUtilisationJustUnderAThresholdIsNeverLoggedAtIt() {
        List<String> lines = new CopyOnWriteArrayList<>();
        MemoryInfo info = new MemoryInfo(10_000, 8_497, 1_503, 10_000, 3, 0.0, OptionalDouble.empty());
        assertEquals(MemoryPressure.MEDIUM, info.pressureLevel());
        new LogMonitor(into(lines)).pressureChanged(Device.cpu(), MemoryPressure.HIGH, MemoryPressure.MEDIUM, info);
        assertEquals(List.of("info Memory pressure on cpu:0: HIGH -> MEDIUM (84.9 % used, 8497 of 10000 bytes,"
                + " 3 allocations)"), lines);
    }
}
