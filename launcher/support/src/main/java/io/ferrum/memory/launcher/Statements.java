package io.ferrum.memory.launcher;

import java.util.ArrayList;
import java.util.List;

/**
 * Splits a script ({@code -c} of the distribution) into the lines the console runs one by one, so
 * that each command's answer is printed and each failure counted, as for piped input. A statement
 * ends at a line end ({@code \n}, {@code \r\n} or a lone {@code \r}, as piped input's lines end:
 * {@link InputLines}) or at a {@code ;} outside quotes ({@code '}, {@code "}) and outside brackets
 * ({@code {}}, {@code ()}, {@code []}), where Gogo itself would not split it (inside them a lone
 * {@code \r} goes to Gogo as a {@code \n}, which ends a statement there); outside single quotes
 * a backslash keeps the next character (inside them, as in Gogo, it is itself). A {@code #} that
 * starts a word outside quotes begins a comment to the end of the line, inside a closure too (its
 * quotes and brackets are not read). Blank statements are dropped.
 */
final class Statements {
    private Statements() {
    }

    /**
     * @param script the commands, e.g. {@code mem:devices; h = mem:alloc 1m; mem:free $h}
     * @return the statements, stripped, in order
     */
    static List<String> split(String script) {
        List<String> out = new ArrayList<>();
        StringBuilder cur = new StringBuilder();
        char quote = 0;
        int depth = 0;
        for (int i = 0; i < script.length(); i++) {
            char c = script.charAt(i);
            if (c == '\\' && quote != '\'' && i + 1 < script.length()) {
                cur.append(c).append(script.charAt(++i));
                continue;
            }
            if (quote != 0) {
                if (c == quote) {
                    quote = 0;
                }
            } else if (c == '\'' || c == '"') {
                quote = c;
            } else if (c == '#' && (cur.isEmpty() || Character.isWhitespace(cur.charAt(cur.length() - 1)))) {
                while (i + 1 < script.length() && !lineEnd(script.charAt(i + 1))) {
                    i++; // a comment, to the end of the line
                }
                continue;
            } else if (c == '{' || c == '(' || c == '[') {
                depth++;
            } else if ((c == '}' || c == ')' || c == ']') && depth > 0) {
                depth--;
            } else if ((c == ';' || lineEnd(c)) && depth == 0) {
                add(out, cur);
                continue;
            } else if (c == '\r' && (i + 1 == script.length() || script.charAt(i + 1) != '\n')) {
                // Inside brackets Gogo ends a statement at \n but reads \r as a space: a lone \r is a line end.
                c = '\n';
            }
            cur.append(c);
        }
        add(out, cur);
        return out;
    }

    /** A {@code \r\n} ends a statement at its {@code \r}; the {@code \n} then ends a blank one, dropped. */
    private static boolean lineEnd(char c) {
        return c == '\n' || c == '\r';
    }

    private static void add(List<String> out, StringBuilder cur) {
        String s = cur.toString().strip();
        if (!s.isEmpty()) {
            out.add(s);
        }
        cur.setLength(0);
    }
}
