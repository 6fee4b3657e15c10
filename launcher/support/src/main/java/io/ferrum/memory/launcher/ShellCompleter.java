package io.ferrum.memory.launcher;

import java.util.ArrayList;
import java.util.Collection;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

import org.apache.felix.service.command.CommandSession;
import org.jline.reader.Candidate;
import org.jline.reader.Completer;
import org.jline.reader.LineReader;
import org.jline.reader.ParsedLine;
import org.osgi.framework.BundleContext;
import org.osgi.framework.InvalidSyntaxException;
import org.osgi.framework.ServiceReference;

import io.ferrum.memory.api.AllocationStrategy;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.GlobalMemoryMonitor;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandleInfo;
import io.ferrum.memory.api.MemoryType;

/**
 * Tab completion at the console: the first word from the commands Gogo knows (and {@code exit},
 * {@code quit}); the words after a {@code mem:*} command from what is live now, only of the kinds that
 * command takes: strategy names after {@code mem:strategy}, device names, the handles of live blocks,
 * memory types, access modes after {@code mem:map}, and nothing after a command that takes no word.
 * Every list is read when Tab is pressed, so a device or block that just appeared is offered.
 */
final class ShellCompleter implements Completer {
    /** Gogo's session variable holding every {@code scope:function} it can run. */
    private static final String COMMANDS = ".commands";

    private final BundleContext context;
    private final CommandSession session;

    ShellCompleter(BundleContext context, CommandSession session) {
        this.context = context;
        this.session = session;
    }

    @Override
    public void complete(LineReader reader, ParsedLine line, List<Candidate> candidates) {
        Collection<String> words = line.wordIndex() == 0 ? commands() : arguments(line.words().get(0));
        for (String w : words) {
            candidates.add(new Candidate(w));
        }
    }

    /** @return every command, {@code scope:function}, sorted */
    Set<String> commands() {
        Set<String> names = new TreeSet<>(List.of("exit", "quit"));
        if (session.get(COMMANDS) instanceof Collection<?> all) {
            all.forEach(c -> names.add(String.valueOf(c)));
        }
        return names;
    }

    /** What a word after a {@code mem:*} command may be. */
    private enum Word { DEVICE, HANDLE, TYPE, ACCESS, STRATEGY }

    /**
     * The words each {@code mem:*} command takes, as its usage says: Tab offers those and nothing the
     * command would refuse ({@code mem:devices} takes no word, {@code mem:free} no device). A command
     * not listed here (a newer shell bundle's) is offered devices, types and handles.
     */
    private static final Map<String, Set<Word>> TAKES = Map.ofEntries(
            Map.entry("mem:devices", EnumSet.noneOf(Word.class)),
            Map.entry("mem:pressure", EnumSet.noneOf(Word.class)),
            Map.entry("mem:streams", EnumSet.noneOf(Word.class)),
            Map.entry("mem:gc", EnumSet.noneOf(Word.class)),
            Map.entry("mem:backends", EnumSet.noneOf(Word.class)),
            Map.entry("mem:strategies", EnumSet.noneOf(Word.class)),
            Map.entry("mem:strategy", EnumSet.of(Word.STRATEGY)),
            Map.entry("mem:info", EnumSet.of(Word.DEVICE)),
            Map.entry("mem:handles", EnumSet.of(Word.DEVICE)),
            Map.entry("mem:defrag", EnumSet.of(Word.DEVICE)),
            Map.entry("mem:alloc", EnumSet.of(Word.DEVICE, Word.TYPE)),
            Map.entry("mem:pool", EnumSet.of(Word.DEVICE, Word.TYPE)),
            Map.entry("mem:load", EnumSet.of(Word.DEVICE, Word.HANDLE, Word.TYPE)),
            Map.entry("mem:map", EnumSet.of(Word.HANDLE, Word.ACCESS)),
            Map.entry("mem:free", EnumSet.of(Word.HANDLE)),
            Map.entry("mem:copy", EnumSet.of(Word.HANDLE)),
            Map.entry("mem:write", EnumSet.of(Word.HANDLE)),
            Map.entry("mem:read", EnumSet.of(Word.HANDLE)),
            Map.entry("mem:fill", EnumSet.of(Word.HANDLE)),
            Map.entry("mem:dump", EnumSet.of(Word.HANDLE)),
            Map.entry("mem:unmap", EnumSet.of(Word.HANDLE)),
            Map.entry("mem:save", EnumSet.of(Word.HANDLE)));

    /** @return what may follow {@code command}: devices, then handles, then memory types or access modes */
    List<String> arguments(String command) {
        if (!command.startsWith("mem:")) {
            return List.of();
        }
        Set<Word> takes = TAKES.getOrDefault(command, EnumSet.of(Word.DEVICE, Word.HANDLE, Word.TYPE));
        if (takes.contains(Word.STRATEGY)) {
            return strategies();
        }
        List<String> words = new ArrayList<>();
        if (takes.contains(Word.DEVICE) || takes.contains(Word.HANDLE)) {
            ServiceReference<GlobalMemoryMonitor> ref = context.getServiceReference(GlobalMemoryMonitor.class);
            GlobalMemoryMonitor monitor = ref == null ? null : context.getService(ref);
            if (monitor != null) {
                try {
                    Set<Device> devices = new TreeSet<>(monitor.devices());
                    if (takes.contains(Word.DEVICE)) {
                        devices.forEach(d -> words.add(d.toString()));
                    }
                    for (Device d : takes.contains(Word.HANDLE) ? devices : Set.<Device>of()) {
                        try {
                            monitor.manager(d).map(DeviceMemoryManager::handles).ifPresent(hs -> {
                                for (MemoryHandleInfo i : hs) {
                                    words.add(i.handle().toString());
                                }
                            });
                        } catch (DeviceUnavailableException goneMeanwhile) {
                            // Its backend stopped since the listing: no blocks to offer. Thrown out of
                            // here, JLine would drop every candidate, the other devices' too.
                        }
                    }
                } catch (DeviceUnavailableException monitorStopped) {
                    // The monitor stopped under Tab: no devices or blocks to offer; the kinds below still are.
                } finally {
                    context.ungetService(ref);
                }
            }
        }
        if (takes.contains(Word.TYPE)) {
            for (MemoryType t : MemoryType.values()) {
                words.add(t.name());
            }
        }
        if (takes.contains(Word.ACCESS)) {
            for (MemoryAccess a : MemoryAccess.values()) {
                words.add(a.name());
            }
        }
        return words;
    }

    /** @return the names of the strategies present, sorted */
    List<String> strategies() {
        Set<String> names = new TreeSet<>();
        try {
            for (ServiceReference<AllocationStrategy> r : context.getServiceReferences(AllocationStrategy.class, null)) {
                Object name = r.getProperty(AllocationStrategy.NAME_PROPERTY);
                if (name != null) {
                    names.add(name.toString());
                }
            }
        } catch (InvalidSyntaxException e) {
            throw new IllegalStateException(e); // no filter is given
        }
        return new ArrayList<>(names);
    }
}
