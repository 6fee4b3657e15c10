package io.ferrum.memory.shell;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * A plain text table as a command's {@link Reply}: a header row, then one row per item; the first
 * column left-aligned, the others right-aligned (they are mostly numbers) unless named text columns
 * ({@link #text}), two spaces between, no trailing blanks and no final line end. Tests read its
 * cells with {@link #column}.
 */
final class Table implements Reply {
    private final String[] header;
    private final List<String[]> rows = new ArrayList<>();
    /** Columns aligned left, like the first: free text (a note, a bundle name) reads from its start. */
    private final boolean[] left;

    Table(String... header) {
        this.header = header;
        this.left = new boolean[header.length];
        if (header.length > 0) {
            left[0] = true;
        }
    }

    /**
     * @param names headers of columns that hold text, aligned left
     * @return this table
     * @throws IllegalArgumentException if the table has no such column
     */
    Table text(String... names) {
        for (String n : names) {
            int i = Arrays.asList(header).indexOf(n);
            if (i < 0) {
                throw new IllegalArgumentException("No column '" + n + "' in " + List.of(header));
            }
            left[i] = true;
        }
        return this;
    }

    /**
     * @param cells one value per column, printed with {@code toString}; {@code null} or a missing
     *              trailing cell is empty
     * @return this table
     */
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

    /**
     * @param name a column's header
     * @return that column's cells, one per row, in row order
     * @throws IllegalArgumentException if the table has no such column
     */
    List<String> column(String name) {
        int i = Arrays.asList(header).indexOf(name);
        if (i < 0) {
            throw new IllegalArgumentException("No column '" + name + "' in " + List.of(header));
        }
        return rows.stream().map(r -> r[i]).toList();
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
        List<String> lines = new ArrayList<>(rows.size() + 1);
        lines.add(line(header, w, left));
        for (String[] r : rows) {
            lines.add(line(r, w, left));
        }
        return String.join(System.lineSeparator(), lines);
    }

    private static String line(String[] cells, int[] w, boolean[] left) {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < cells.length; i++) {
            if (i > 0) {
                sb.append("  ");
            }
            String pad = " ".repeat(w[i] - cells[i].length());
            sb.append(left[i] ? cells[i] + pad : pad + cells[i]);
        }
        return sb.toString().stripTrailing();
    }
}
