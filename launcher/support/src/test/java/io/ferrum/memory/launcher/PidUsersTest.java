package io.ferrum.memory.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.ByteArrayInputStream;
import java.nio.charset.StandardCharsets;
import java.util.List;

import javax.xml.stream.XMLStreamException;

import org.junit.jupiter.api.Test;

class PidUsersTest {
    private static List<String> pids(String xml) throws XMLStreamException {
        return PidUsers.componentPids(new ByteArrayInputStream(xml.getBytes(StandardCharsets.UTF_8)));
    }

    @Test
    void aComponentTakesItsConfigurationPidsOrItsName() throws XMLStreamException {
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
    void severalComponentsInOneDocumentAreRead() throws XMLStreamException {
        assertEquals(List.of("one", "two"), pids("<components xmlns:scr=\"http://www.osgi.org/xmlns/scr/v1.3.0\">"
                + "<scr:component name=\"one\"/><scr:component name=\"two\" configuration-policy=\"require\"/></components>"));
    }

    /** A component that ignores configuration takes none; an element of another namespace is no component. */
    @Test
    void aComponentThatIgnoresConfigurationTakesNothing() throws XMLStreamException {
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
    void aComponentWithoutANameIsNamedByItsImplementationClass() throws XMLStreamException {
        assertEquals(List.of("io.ferrum.memory.extra.Plugin", "a.b", "io.ferrum.memory.extra.Other"), pids(
                "<components xmlns:scr=\"http://www.osgi.org/xmlns/scr/v1.1.0\">"
                + "<scr:component><property name=\"p\" value=\"v\"/><implementation class=\"io.ferrum.memory.extra.Plugin\"/></scr:component>"
                + "<scr:component configuration-pid=\"a.b $\"><implementation class=\"io.ferrum.memory.extra.Other\"/></scr:component>"
                + "</components>"));
        assertEquals(List.of("named"), pids("<components><component><implementation class=\"x.Y\"/></component>"
                + "<component name=\"named\"><implementation class=\"x.Z\"/></component></components>"));
    }
}
