package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;

import org.junit.jupiter.api.Test;

/** What a refusal shows of attributes the component does not know. */
class ConfigurationCheckTest {
    /** A stand-in for a component's configuration type. */
    @interface Config {
        String capacity();

        String index();
    }

    /**
     * Review defect: a .cfg file of random bytes was refused with its raw bytes, control characters
     * and all, as "Unknown attribute" names in the log and in mem:backends.
     */
    /** A signed value is named with the attribute's own lower bound: "zero or more" would offer a refused 0. */
    @Test
    void aSignedNumberIsNamedWithTheAttributesOwnLowerBound() {
        ConfigurationCheck check = new ConfigurationCheck();
        assertEquals(null, check.integer("maxConcurrentTransfers", "-2", 1));
        assertEquals(null, check.integer("maxConcurrentTransfers", -2, 1));
        assertEquals(null, check.integer("stagingSlots", "+8", 2));
        assertEquals(Integer.valueOf(4), check.integer("maxConcurrentTransfers", "4", 1));
        assertEquals(List.of("Invalid maxConcurrentTransfers '-2': use a whole number, 1 or more, without a sign",
                "Invalid maxConcurrentTransfers '-2': use a whole number, 1 or more",
                "Invalid stagingSlots '+8': use a whole number, 2 or more, without a sign"), check.problems());
        assertEquals(List.of("Invalid capacity '-5': use a whole number, zero or more, without a sign"),
                problemsOf(c -> c.longInteger("capacity", "-5")));
    }

    private static List<String> problemsOf(java.util.function.Consumer<ConfigurationCheck> reads) {
        ConfigurationCheck check = new ConfigurationCheck();
        reads.accept(check);
        return check.problems();
    }

    @Test
    void anUnknownAttributeOfBinaryBytesIsShownEscapedAndBounded() {
        byte[] noise = new byte[4096];
        new Random(42).nextBytes(noise);
        Map<String, Object> properties = new LinkedHashMap<>();
        for (String line : new String(noise, java.nio.charset.StandardCharsets.ISO_8859_1).split("[\r\n]")) {
            String key = line.replace(".", "");
            if (!key.isEmpty()) {
                properties.put(key, "x");
            }
        }
        assertTrue(properties.size() > 3, "the noise reads as many keys");

        ConfigurationCheck check = new ConfigurationCheck();
        check.knownAttributes(properties, Config.class);
        List<String> problems = check.problems();

        for (String p : problems) {
            assertTrue(p.chars().allMatch(c -> c >= 0x20 && c < 0x7f), "printable ASCII only: " + p);
            assertTrue(p.length() < 200, "bounded: " + p.length() + " characters: " + p);
        }
        assertEquals(4, problems.size(), "three named, the rest counted: " + problems);
        assertEquals((properties.size() - 3) + " more unknown attributes: is this a configuration file?", problems.getLast());
    }

    @Test
    void aLongOrControlCharacterNameIsEscapedAndCut() {
        assertEquals("a\\u0007b\\u00e9", ConfigurationCheck.printable("a\u0007b\u00e9"));
        assertEquals("x".repeat(40) + "...(+60 characters)", ConfigurationCheck.printable("x".repeat(100)));
        assertEquals("capacty", ConfigurationCheck.printable("capacty"));
    }
}
