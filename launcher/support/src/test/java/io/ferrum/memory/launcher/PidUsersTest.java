package io.ferrum.memory.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;

import org.junit.jupiter.api.Test;

class PidUsersTest {
    private static List<String> pids(String xml) throws Exception {
        return PidUsers.componentPids(new ByteArrayInputStream(xml.getBytes(StandardCharsets.UTF_8)));
    }

    @Test
    void aComponentTakesItsConfigurationPidsOrItsName() throws Exception {
        assertEquals(List.of("io.ferrum.memory.extra"), pids("<scr:component xmlns:scr=\"http://www.osgi.org/xmlns/scr/v1.3.0\""
                + " name=\"io.ferrum.memory.extra.Plugin\" configuration-pid=\"io.ferrum.memory.extra\"/>"));
        assertEquals(List.of("io.ferrum.memory.extra.Plugin"), pids("<scr:component xmlns:scr=\"http://www.osgi.org/xmlns/scr/v1.1.0\""
                + " name=\"io.ferrum.memory.extra.Plugin\"><implementation class=\"x.Y\"/></scr:component>"));
        // DS 1.3: several PIDs, $ for the name; DS 1.0 without a namespace
        assertEquals(List.of("a.b", "io.ferrum.memory.extra.Plugin"), pids("<scr:component xmlns:scr=\"http://www.osgi.org/xmlns/scr/v1.4.0\""
                + " name=\"io.ferrum.memory.extra.Plugin\" configuration-pid=\" a.b  $ \"/>"));
        assertEquals(List.of("c"), pids("<component name=\"c\"/>"));
    }

    @Test
    void severalComponentsInOneDocumentAreRead() throws Exception {
        assertEquals(List.of("one", "two"), pids("<components xmlns:scr=\"http://www.osgi.org/xmlns/scr/v1.3.0\">"
                + "<scr:component name=\"one\"/><scr:component name=\"two\" configuration-policy=\"require\"/></components>"));
    }

    /** A component that ignores configuration takes none; an element of another namespace is no component. */
    @Test
    void aComponentThatIgnoresConfigurationTakesNothing() throws Exception {
        assertEquals(List.of(), pids("<scr:component xmlns:scr=\"http://www.osgi.org/xmlns/scr/v1.3.0\" name=\"a\""
                + " configuration-policy=\"ignore\"/>"));
        assertEquals(List.of(), pids("<x:component xmlns:x=\"http://example.com/other\" name=\"a\"/>"));
    }

    /**
     * Since DS 1.1 a component's name may be left out: it is then its implementation class, and so is
     * its configuration PID (SCR's own rule). Read as no name at all, it threw a NullPointerException
     * out of the config/ check, which then named no file at all; in DS 1.0 such a component is invalid.
     */
    @Test
    void aComponentWithoutANameIsNamedByItsImplementationClass() throws Exception {
        assertEquals(List.of("io.ferrum.memory.extra.Plugin", "a.b", "io.ferrum.memory.extra.Other"), pids(
                "<components xmlns:scr=\"http://www.osgi.org/xmlns/scr/v1.1.0\">"
                + "<scr:component><property name=\"p\" value=\"v\"/>"
                + "<implementation class=\"io.ferrum.memory.extra.Plugin\"/></scr:component>"
                + "<scr:component configuration-pid=\"a.b $\"><implementation class=\"io.ferrum.memory.extra.Other\"/></scr:component>"
                + "</components>"));
        assertEquals(List.of("named"), pids("<components><component><implementation class=\"x.Y\"/></component>"
                + "<component name=\"named\"><implementation class=\"x.Z\"/></component></components>"));
    }

    /**
     * A description whose bytes are not valid in its encoding (a Latin-1 comment in a UTF-8 document),
     * which SCR refuses too: unreadable, without the JDK's StAX parser printing "[Fatal Error] :-1:-1:
     * Invalid byte 2 of 3-byte UTF-8 sequence." on the process's standard error, where a script's
     * failures are one error: line each, once per file looked at.
     */
    @Test
    void aDocumentNotValidInItsEncodingIsUnreadableWithoutAWordOnStandardError() throws Exception {
        byte[] latin1 = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!-- caf\u00e9 -->\n<component name=\"a\"/>"
                .getBytes(StandardCharsets.ISO_8859_1);
        PrintStream err = System.err;
        ByteArrayOutputStream printed = new ByteArrayOutputStream();
        System.setErr(new PrintStream(printed, true, StandardCharsets.UTF_8));
        try {
            assertThrows(Exception.class, () -> PidUsers.componentPids(new ByteArrayInputStream(latin1)));
        } finally {
            System.setErr(err);
        }
        assertEquals("", printed.toString(StandardCharsets.UTF_8));
    }

    /** SCR's own parser expands a document's internal entities, and reads no external one. */
    @Test
    void internalEntitiesAreExpandedAndExternalOnesNotRead() throws Exception {
        assertEquals(List.of("io.ferrum.memory.x"), pids("<!DOCTYPE c [<!ENTITY x \"io.ferrum.memory.x\">]><component name=\"&x;\"/>"));
        assertEquals(List.of("a"), pids("<!DOCTYPE c SYSTEM \"http://example.invalid/x.dtd\"><component name=\"a\"/>"));
        assertThrows(Exception.class, () -> pids("<!DOCTYPE c [<!ENTITY x SYSTEM \"file:///etc/hostname\">]><component name=\"&x;\"/>"));
    }
}
