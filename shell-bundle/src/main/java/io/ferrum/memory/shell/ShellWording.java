package io.ferrum.memory.shell;

import java.util.List;
import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Puts the advice in the messages of the API's exceptions into the shell's words. The managers and
 * the router speak to programs ("raise maxSize with configurePool", "map it with mapMemory"); a
 * person at the {@code g!} prompt needs the command that does it ({@code mem:pool cpu:0 GENERAL
 * maxSize=SIZE}, {@code mem:map}). The API's messages and semantics stay as they are: only what the
 * shell prints is reworded, and a message with none of these phrases passes unchanged.
 */
final class ShellWording {
    /** One rewording: where the phrase is, and what replaces it (the groups name the device and the pool). */
    record Rule(Pattern phrase, Function<Matcher, String> shell) {
    }

    /** The pool engine's reasons why a pool may not grow (Checks.poolAtLimit, deviceFull, chunkRefused). */
    private static final Pattern AT_MAX_SIZE = Pattern.compile("may hold at most .* \\(maxSize\\)");
    private static final Pattern MAY_NOT_GROW = Pattern.compile("may not grow \\(enableAutoExpansion=false\\)");
    private static final Pattern DEVICE_FULL = Pattern.compile("the device's pools already hold .* capacity");
    private static final Pattern CHUNK_REFUSED = Pattern.compile("the device refused a chunk");

    private static final List<Rule> RULES = List.of(
            // Checks: a size over a pool's maxSize.
            new Rule(Pattern.compile("on (\\S+) exceeds the (\\w+) pool's maxSize of (.*?); raise maxSize with configurePool"),
                    m -> "on " + m.group(1) + " exceeds the " + m.group(2) + " pool's maxSize of " + m.group(3)
                            + "; raise it with mem:pool " + m.group(1) + " " + m.group(2) + " maxSize=SIZE (0: unlimited),"
                            + " or in the device's configuration to keep it"),
            // Checks: a size over the initial size of a pool that may not grow.
            new Rule(Pattern.compile("on (\\S+) exceeds the (\\w+) pool's initialSize of (.*?) and the pool may not grow"
                    + " \\(enableAutoExpansion=false\\)"),
                    m -> "on " + m.group(1) + " exceeds the " + m.group(2) + " pool's initialSize of " + m.group(3)
                            + " and the pool may not grow; let it with mem:pool " + m.group(1) + " " + m.group(2)
                            + " autoExpansion=true"),
            // Checks: out of memory in a pool; the advice depends on the limit the pool hit.
            new Rule(Pattern.compile("Out of memory on (\\S+): cannot allocate (.*?) in the (\\w+) pool: (.*?); free blocks,"
                    + " raise the limit, or defragment"),
                    m -> "Out of memory on " + m.group(1) + ": cannot allocate " + m.group(2) + " in the " + m.group(3)
                            + " pool: " + m.group(4).replace("enableAutoExpansion=false", "autoExpansion=false")
                            + "; " + outOfMemoryAdvice(m.group(1), m.group(3), m.group(4))),
            // Checks: a fixed pool's initialSize below its live blocks, named by the key mem:pool takes.
            new Rule(Pattern.compile("(Cannot fix the \\w+ pool on \\S+ at its initialSize of .*?) \\(enableAutoExpansion=false\\)"),
                    m -> m.group(1) + " (autoExpansion=false)"),
            // MemoryPoolConfig: a pool that may grow needs a step to grow by; mem:pool's keys name both.
            new Rule(Pattern.compile("growthIncrement is 0 while enableAutoExpansion is on; give a growth increment or turn"
                    + " auto-expansion off"),
                    m -> "growthIncrement is 0 while autoExpansion is on; give a growthIncrement or set autoExpansion=false"),
            // Checks: unmapping a block that is not mapped.
            new Rule(Pattern.compile("is not mapped; map it with mapMemory before unmapping"),
                    m -> "is not mapped; map it with mem:map before mem:unmap"),
            // Checks: a data-path call on a block mapped through a host staging copy (a GPU's), alone or
            // quoted by a routed copy that stopped after its first piece.
            new Rule(Pattern.compile("Block (\\S+) on (\\S+) is mapped through a host staging copy \\(mapMemory\\)(.*?)"
                    + " unmapMemory it first\\."),
                    m -> "Block " + m.group(1) + " on " + m.group(2) + " is mapped through a host staging copy (mem:map)"
                            + m.group(3) + " Unmap it first (mem:unmap " + m.group(1) + ")."),
            // Checks: a block pinned by a program's scoped view.
            new Rule(Pattern.compile("a withMapped action"), m -> "a program's scoped view (withMapped)"),
            new Rule(Pattern.compile("withMapped actions, reads or writes"), m -> "scoped views, reads or writes"),
            // The router: stopped while a command ran.
            new Rule(Pattern.compile(": (\\w+)\\(.*\\) was not carried out\\. (.*); get the running MemoryRouter or"
                    + " GlobalMemoryMonitor service and call it there"),
                    m -> ": nothing was done. " + m.group(2) + "; run the command again once the bundle"
                            + " io.ferrum.memory.monitor is active"),
            // The router: no device could allocate.
            new Rule(Pattern.compile("\\. Free memory or add a device$"),
                    m -> ". Free blocks (mem:handles, mem:free) or add a device (mem:backends)"),
            // The router: a copy between two devices stopped by Ctrl-C says how far it got, as mem:fill does.
            new Rule(Pattern.compile("^Copy of (\\d+) bytes? from (\\S+ on \\S+) to (\\S+ on \\S+) interrupted after (\\d+)"
                    + " bytes?: the destination holds part of the source \\((destination offsets \\d+ to \\d+)\\), the rest of"
                    + " its range is as it was; copy again to complete it$"),
                    m -> "interrupted: " + Sizes.amount(Long.parseLong(m.group(4))) + " of the "
                            + Sizes.count(Long.parseLong(m.group(1))) + " from " + m.group(2) + " were copied to " + m.group(3)
                            + " (" + m.group(5) + "); the rest of the destination's range is as it was; copy again to"
                            + " complete it"),
            new Rule(Pattern.compile("^Copy of (\\d+) bytes? from (\\S+ on \\S+) to (\\S+ on \\S+) interrupted before its"
                    + " first byte: the destination is as it was$"),
                    m -> "interrupted: 0 bytes of the " + Sizes.count(Long.parseLong(m.group(1))) + " from " + m.group(2)
                            + " were copied to " + m.group(3) + "; the destination is as it was"),
            // The router: every device refused by its own limits, each named in its own message above.
            new Rule(Pattern.compile("\\. Ask for less, or raise the limits named \\(configurePool\\)$"),
                    m -> ". Ask for less, or raise the limits named (mem:pool DEVICE TYPE KEY=VALUE)"));

    private ShellWording() {
    }

    /**
     * @param device the device, as the message names it
     * @param type   the pool's memory type
     * @param why    the pool engine's reason the pool could not grow
     * @return what a person can do about that reason: only a pool's maxSize is raised with {@code
     *         mem:pool}; the device's capacity is its configuration's {@code capacity=}
     */
    private static String outOfMemoryAdvice(String device, String type, String why) {
        String free = "free blocks (mem:handles, mem:free)";
        String defrag = "defragment (mem:defrag " + device + ")";
        if (AT_MAX_SIZE.matcher(why).find()) {
            return free + ", raise the pool's limit (mem:pool " + device + " " + type + " maxSize=SIZE, 0: unlimited),"
                    + " or " + defrag;
        }
        if (MAY_NOT_GROW.matcher(why).find()) {
            return free + ", let the pool grow (mem:pool " + device + " " + type + " autoExpansion=true), or " + defrag;
        }
        if (DEVICE_FULL.matcher(why).find()) {
            return free + " or " + defrag + "; the device's capacity is set by capacity= in its configuration,"
                    + " which mem:pool does not change";
        }
        if (CHUNK_REFUSED.matcher(why).find()) {
            return free + " or " + defrag + "; the device itself has no more memory to give";
        }
        return free + ", raise the pool's limit (mem:pool " + device + " " + type + " maxSize=SIZE) or the device's"
                + " capacity (capacity= in its configuration), or " + defrag;
    }

    /**
     * Each rule rewords every place its phrase occurs: the router's refusal quotes one manager's
     * message per device it tried, and each keeps its own device and pool (the patterns are
     * reluctant, so a match ends at its own message's advice and never reaches the next one's).
     *
     * @param message a message as an exception gave it, or null
     * @return the message with each program's advice replaced by the shell's, or null for null
     */
    static String of(String message) {
        if (message == null) {
            return null;
        }
        String out = message;
        for (Rule r : RULES) {
            Matcher m = r.phrase.matcher(out);
            StringBuilder sb = new StringBuilder();
            int last = 0;
            while (m.find()) {
                sb.append(out, last, m.start()).append(r.shell.apply(m));
                last = m.end();
            }
            out = sb.append(out, last, out.length()).toString();
        }
        return out;
    }
}
