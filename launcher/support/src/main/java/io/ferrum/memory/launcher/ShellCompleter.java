package io.ferrum.memory.launcher;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
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
import io.ferrum.memory.api.GlobalMemoryMonitor;
import io.ferrum.memory.api.MemoryHandleInfo;
import io.ferrum.memory.api.MemoryType;

/**
 * Tab completion at the console: the first word from the commands Gogo knows (and {@code exit},
 * {@code quit}); the words after a {@code mem:*} command from what is live now: strategy names after
 * {@code mem:strategy}, otherwise device names, memory types and the handles of live blocks. Every
 * list is read when Tab is pressed, so a device or block that just appeared is offered.
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

    /** @return what may follow {@code command} */
    List<String> arguments(String command) {
        if (!command.startsWith("mem:")) {
            return List.of();
        }
        if (command.equals("mem:strategy")) {
            return strategies();
        }
        List<String> words = new ArrayList<>();
        ServiceReference<GlobalMemoryMonitor> ref = context.getServiceReference(GlobalMemoryMonitor.class);
        GlobalMemoryMonitor monitor = ref == null ? null : context.getService(ref);
        if (monitor != null) {
            try {
                Set<Device> devices = new TreeSet<>(monitor.devices());
                devices.forEach(d -> words.add(d.toString()));
                for (Device d : devices) {
                    monitor.manager(d).map(DeviceMemoryManager::handles).ifPresent(hs -> {
                        for (MemoryHandleInfo i : hs) {
                            words.add(i.handle().toString());
                        }
                    });
                }
            } finally {
                context.ungetService(ref);
            }
        }
        for (MemoryType t : MemoryType.values()) {
            words.add(t.name());
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
