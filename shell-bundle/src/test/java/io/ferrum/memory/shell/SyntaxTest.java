package io.ferrum.memory.shell;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.InvalidMemoryRequestException;

/** The one parser of command words, and every {@code mem:*} command's answer to a wrong call. */
class SyntaxTest {
    private static final Syntax ALLOC = Syntax.of("alloc").option("-t", "--type", "TYPE").option("-a", "--align", "ALIGN")
            .required("SIZE").optional("DEVICE");

    @Test
    void usageListsOptionsThenRequiredThenNestedOptionalWords() {
        assertEquals("mem:alloc [-t TYPE] [-a ALIGN] SIZE [DEVICE]", ALLOC.usage());
        assertEquals("mem:copy SRC DST SIZE [SRC_OFFSET [DST_OFFSET]]", Syntax.of("copy").required("SRC").required("DST")
                .required("SIZE").optional("SRC_OFFSET").optional("DST_OFFSET").usage());
        assertEquals("mem:write [--text] HANDLE OFFSET [DATA...]", Syntax.of("write").flag("-s", "--text").required("HANDLE")
                .required("OFFSET").rest("DATA").usage());
    }

    /** An unset Gogo variable arrives as null: one line naming the word, not a NullPointerException. */
    @Test
    void anUnsetVariableIsNamedNotANullPointer() {
        InvalidMemoryRequestException e = assertThrows(InvalidMemoryRequestException.class, () -> ALLOC.parse("4k", null));
        assertTrue(e.getMessage().startsWith("mem:alloc got no value for its word 2 (a variable that is not set?)"), e.getMessage());
    }

    @Test
    void shortOptionsTakeTheirValueAfterAnEqualsSignToo() {
        assertEquals("CACHE", ALLOC.parse("-t=CACHE", "1m").option("--type", "GENERAL"));
    }

    /** A failure is one line whatever its message holds (an argument may be a whole table). */
    @Test
    void aFailureIsOneLine() {
        assertEquals("error: Invalid handle 'DEVICE TOTAL cpu:0 1 GiB': expected 0x",
                new Reply.Failure("Invalid handle 'DEVICE  TOTAL\ncpu:0  1 GiB': expected 0x").toString().replace("  ", " "));
    }

    @Test
    void optionsGoAnywhereAndNegativeNumbersArePositional() {
        Syntax.Words w = ALLOC.parse("4k", "--type", "tensor", "cpu:1", "-a", "-8");
        assertEquals("4k", w.get("SIZE"));
        assertEquals("cpu:1", w.get("DEVICE", null));
        assertEquals("tensor", w.option("--type", "GENERAL"));
        assertEquals("-8", w.option("--align", "0"));
        assertEquals("-1", ALLOC.parse("-1").get("SIZE"));
        assertEquals("-x", ALLOC.parse("--", "-x").get("SIZE"));
        assertEquals("GENERAL", ALLOC.parse("1m").option("--type", "GENERAL"));
        assertEquals("tensor", ALLOC.parse("--type=tensor", "1m").option("--type", "GENERAL"));
        assertEquals("Option --text of mem:write takes no value; usage: mem:write [--text] HANDLE OFFSET [DATA...]",
                assertThrows(InvalidMemoryRequestException.class, () -> Syntax.of("write").flag("-s", "--text")
                        .required("HANDLE").required("OFFSET").rest("DATA").parse("--text=yes", "h", "0")).getMessage());
    }

    @Test
    void aWrongCallIsOneMessageThatSaysWhatIsWrongAndGivesTheUsage() {
        String usage = "; usage: mem:alloc [-t TYPE] [-a ALIGN] SIZE [DEVICE]";
        Map<List<String>, String> wrong = Map.of(
                List.of(), "mem:alloc is missing SIZE" + usage,
                List.of("--size", "4k"), "Unknown option --size for mem:alloc; a value starting with - goes after --" + usage,
                List.of("4k", "cpu:0", "extra"), "mem:alloc takes at most 2 arguments, not also 'extra'" + usage,
                List.of("4k", "-t"), "Option -t of mem:alloc needs a value (TYPE)" + usage,
                List.of("--type=CACHE", "-t", "TENSOR", "1m"), "Option --type of mem:alloc is given twice ('CACHE',"
                        + " then 'TENSOR'): give it once" + usage);
        wrong.forEach((args, message) -> {
            InvalidMemoryRequestException e = assertThrows(InvalidMemoryRequestException.class,
                    () -> ALLOC.parse(args.toArray(String[]::new)));
            assertEquals(message, e.getMessage());
        });
        assertEquals("mem:gc takes no arguments, not also 'now'; usage: mem:gc",
                assertThrows(InvalidMemoryRequestException.class, () -> Syntax.of("gc").parse("now")).getMessage());
    }

    /** Issue 17: every command, not only mem:alloc, answers a wrong call with one error line and its usage. */
    @Test
    void everyCommandAnswersAnUnknownOptionAndAWrongCountWithOneErrorLineAndItsUsage() throws Exception {
        List<Object> commands = List.of(new AllocationCommands(), new BytesCommands(), new FileCommands(),
                new MaintenanceCommands(), new DeviceCommands(null), new StrategyCommands(null), new BackendCommands(null));
        List<String> checked = new ArrayList<>();
        for (Object c : commands) {
            for (Method m : c.getClass().getDeclaredMethods()) {
                if (!Modifier.isPublic(m.getModifiers()) || m.getReturnType() != Reply.class) {
                    continue;
                }
                assertTrue(m.isVarArgs(), m + ": one String... method per command, so Gogo always calls it");
                String name = "mem:" + m.getName();
                String unknown = m.invoke(c, (Object) new String[] {"--bogus"}).toString();
                assertTrue(unknown.startsWith("error: Unknown option --bogus for " + name), unknown);
                assertTrue(unknown.contains("; usage: " + name), unknown);
                assertFalse(unknown.contains("\n"), unknown);
                String tooMany = m.invoke(c, (Object) new String[] {"a", "b", "c", "d", "e", "f", "g"}).toString();
                if (!List.of("mem:write", "mem:pool").contains(name)) { // their last words are data or settings
                    assertTrue(tooMany.startsWith("error: " + name + " takes "), tooMany);
                    assertTrue(tooMany.contains("; usage: " + name), tooMany);
                }
                checked.add(name);
            }
        }
        assertEquals(22, checked.size(), checked.toString());
    }
}
