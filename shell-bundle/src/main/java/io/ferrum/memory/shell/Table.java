package io.ferrum.memory.shell;

import java.util.ArrayList;
import java.util.List;

/** A plain text table: left-aligned first column, right-aligned numbers, two spaces between. */
final class Table {
    private final String[] header;
    private final List<String[]> rows = new ArrayList<>();

    Table(String... header) {
        this.header = header;
    }

    Table row(Object... cells) {
        String[] r = new String[header.length];
        for (int i = 0; i < r.length; i++) {
            r[i] = i < cells.length && cells[i] != null ? cells[i].toString() : "";
        }
        rows.add(r);
        return this;
    }

    boolean isEmpty() {
        return rows.isEmpty();
    }

    @Override
    public String toString() {
        int[] w = new int[header.length];
        for (int i = 0; i < w.length; i++) {
            w[i] = header[i].length();
            for (String[] r : rows) {
                w[i] = Math.max(w[i], r[i].length());
            }
        }
        StringBuilder sb = new StringBuilder();
        line(sb, header, w);
        for (String[] r : rows) {
            line(sb, r, w);
        }
        return sb.toString();
    }

    private static void line(StringBuilder sb, String[] cells, int[] w) {
        for (int i = 0; i < cells.length; i++) {
            if (i > 0) {
                sb.append("  ");
            }
            String pad = " ".repeat(w[i] - cells[i].length());
            sb.append(i == 0 ? cells[i] + pad : pad + cells[i]);
        }
        int end = sb.length();
        while (end > 0 && sb.charAt(end - 1) == ' ') {
            end--;
        }
        sb.setLength(end);
        sb.append(System.lineSeparator());
    }
}
