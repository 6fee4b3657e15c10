package io.ferrum.memory.launcher;

import javax.xml.parsers.ParserConfigurationException;
import javax.xml.parsers.SAXParser;
import javax.xml.parsers.SAXParserFactory;

import org.xml.sax.SAXException;

/**
 * The one way this bundle makes a SAX parser for a file it did not write (a bundle's component
 * descriptions, a {@code config/} file in Java's XML properties): internal entities are expanded,
 * and no external entity or DTD is fetched ({@code properties.dtd} is a URL; a file may name any).
 */
final class SaxParsers {
    private SaxParsers() {
    }

    /** @param namespaceAware whether elements are told with their namespace (a DS description's is) */
    static SAXParser withoutExternalEntities(boolean namespaceAware) {
        SAXParserFactory f = SAXParserFactory.newDefaultInstance();
        f.setNamespaceAware(namespaceAware);
        try {
            f.setFeature("http://xml.org/sax/features/external-general-entities", false);
            f.setFeature("http://xml.org/sax/features/external-parameter-entities", false);
            f.setFeature("http://apache.org/xml/features/nonvalidating/load-external-dtd", false);
            return f.newSAXParser();
        } catch (ParserConfigurationException | SAXException cannotBe) {
            throw new IllegalStateException("the JDK's SAX parser has these features", cannotBe);
        }
    }
}
