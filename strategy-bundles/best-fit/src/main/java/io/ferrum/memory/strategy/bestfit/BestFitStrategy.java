package io.ferrum.memory.strategy.bestfit;

import java.util.List;
import java.util.Map;
import java.util.Optional;

import org.osgi.service.component.annotations.Component;

import io.ferrum.memory.api.AllocationRequirements;
import io.ferrum.memory.api.AllocationStrategy;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.StrategyName;

/**
 * The seed contract's {@code BestFitStrategy}, exactly: a device with less free memory than the
 * request is skipped; the others are scored
 *
 * <pre>
 *   score = 1 - (free - size) / total - |utilisation - 0.5| * 0.5 + 0.2 / (position + 1)
 * </pre>
 *
 * where utilisation is used/total in [0, 1] and the last term applies only to a device at
 * {@code position} in the preferred devices. The highest score wins; on a tie the device earlier in
 * {@code available} wins. A device with a total of zero cannot hold anything and is skipped (the seed
 * would divide by zero). The default strategy of the router.
 */
@Component(service = AllocationStrategy.class)
@StrategyName(BestFitStrategy.NAME)
public final class BestFitStrategy implements AllocationStrategy {
    /** The strategy's name: its {@value AllocationStrategy#NAME_PROPERTY} service property and {@link #name()}. */
    static final String NAME = "best-fit";

    /**
     * The API classes {@link #selectDevice} names, loaded when the monitor takes this strategy (its
     * service object is made then), before any select. A swap may make a strategy active that was
     * never asked, while Equinox uninstalls the api: its loader then refuses this bundle's first ask
     * for any of them, though it defined them long before. MonitorIT fails on one left out.
     */
    static final List<Class<?>> LOADED_EARLY = List.of(AllocationRequirements.class, Device.class, MemoryInfo.class);

    @Override
    public Optional<Device> selectDevice(long size, AllocationRequirements requirements, List<Device> available,
                                         Map<Device, MemoryInfo> memoryInfo) {
        // Scores are computed only once a second device qualifies: one that qualifies alone wins
        // whatever its score (the router asks on every allocation, mostly with one device).
        Device only = null;
        MemoryInfo onlyInfo = null;
        Device best = null;
        double bestScore = Double.NEGATIVE_INFINITY;
        for (Device device : available) {
            MemoryInfo info = memoryInfo.get(device);
            if (info == null || info.totalBytes() == 0 || info.freeBytes() < size) {
                continue;
            }
            if (only == null && best == null) {
                only = device;
                onlyInfo = info;
                continue;
            }
            if (only != null) {
                best = only;
                bestScore = fullScore(size, onlyInfo, requirements, only);
                only = null;
            }
            double score = fullScore(size, info, requirements, device);
            if (score > bestScore) {
                bestScore = score;
                best = device;
            }
        }
        return Optional.ofNullable(only != null ? only : best);
    }

    private static double fullScore(long size, MemoryInfo info, AllocationRequirements requirements, Device device) {
        return score(size, info) + preferenceBonus(requirements.preferenceOf(device));
    }

    /** @return the seed's fit score of {@code size} bytes on a device described by {@code info} */
    static double score(long size, MemoryInfo info) {
        double perByte = 1.0 / (double) info.totalBytes(); // one division instead of three: this runs on every allocation
        double waste = (double) (info.freeBytes() - size) * perByte;
        double utilization = (double) info.usedBytes() * perByte;
        return 1.0 - waste - Math.abs(utilization - 0.5) * 0.5;
    }

    /** @return {@code 0.2 / (position + 1)} for a preferred device, else 0 */
    static double preferenceBonus(int position) {
        return position < 0 ? 0.0 : 0.2 / (position + 1.0);
    }

    @Override
    public String name() {
        return NAME;
    }
}
