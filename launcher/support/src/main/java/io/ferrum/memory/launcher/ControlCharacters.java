package io.ferrum.memory.launcher;

/**
 * Text the distribution prints that it did not write itself (a shell argument, a file's name or value)
 * made safe for a terminal and a log: a value with an ESC sequence could recolour or clear the
 * terminal, one with a line break forge a line.
 */
final class ControlCharacters {
    private ControlCharacters() {
    }

    /**
     * @return {@code text} with each control character (C0, DEL, C1), format character (bidi overrides)
     *         and line or paragraph separator as a Java escape ({@code \u001b}); letters outside ASCII
     *         stay (a file name may hold one)
     */
    static String escaped(Object text) {
        String s = String.valueOf(text);
        StringBuilder shown = new StringBuilder(s.length());
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (Character.getType(c)) {
                case Character.CONTROL, Character.FORMAT, Character.LINE_SEPARATOR, Character.PARAGRAPH_SEPARATOR ->
                        shown.append(String.format("\\u%04x", (int) c));
                default -> shown.append(c);
            }
        }
        return shown.toString();
    }
}
