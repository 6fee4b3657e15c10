package io.ferrum.memory.api;

import java.util.Locale;
import java.util.Objects;

/**
 * A device that holds memory: a kind and an index, written {@code kind:index}.
 *
 * <p>The kind is an open set of lower-case names so that device plugins can add kinds of their own;
 * the well-known ones are {@value #CPU}, {@value #CUDA}, {@value #ROCM} and {@value #METAL}.
 * Several logical devices of one kind are told apart by their index ({@code cpu:0}, {@code cpu:1}
 * for tenants or NUMA nodes; {@code cuda:0}, {@code cuda:1} for GPUs).
 *
 * <p>The text form is always {@code kind:index} ({@code cpu:0}, {@code metal:0}); {@link
 * #parse(String)} also accepts a bare kind as index 0 ({@code cpu}, {@code metal}), as the Rust seed
 * displays them. {@code Device.parse(d.toString()).equals(d)} holds for every device. The text
 * form is the value of the {@link DeviceMemoryManager#DEVICE_PROPERTY} service property.
 *
 * @param kind  lower-case name: a letter, then letters, digits, {@code _} or {@code -}
 * @param index zero or more
 */
public record Device(String kind, int index) implements Comparable<Device> {

    /** Host memory. */
    public static final String CPU = "cpu";
    /** NVIDIA GPUs through CUDA. */
    public static final String CUDA = "cuda";
    /** AMD GPUs through ROCm. */
    public static final String ROCM = "rocm";
    /** Apple GPUs through Metal. */
    public static final String METAL = "metal";

    /**
     * Validates the kind and index.
     *
     * @throws InvalidMemoryRequestException if the kind is null or malformed or the index negative
     */
    public Device {
        if (kind == null || !isValidKind(kind)) {
            throw new InvalidMemoryRequestException("Invalid device kind '" + kind
                    + "': expected a lower-case name such as cpu, cuda, rocm or metal"
                    + " (a letter, then letters, digits, '_' or '-')");
        }
        if (index < 0) {
            throw new InvalidMemoryRequestException("Invalid device index " + index + " for kind '" + kind
                    + "': the index must be zero or more");
        }
    }

    /** @return {@code cpu:0}, the host */
    public static Device cpu() {
        return new Device(CPU, 0);
    }

    /**
     * @param index logical host device, zero or more
     * @return {@code cpu:index}
     */
    public static Device cpu(int index) {
        return new Device(CPU, index);
    }

    /**
     * @param index CUDA device ordinal, zero or more
     * @return {@code cuda:index}
     */
    public static Device cuda(int index) {
        return new Device(CUDA, index);
    }

    /**
     * @param index ROCm device ordinal, zero or more
     * @return {@code rocm:index}
     */
    public static Device rocm(int index) {
        return new Device(ROCM, index);
    }

    /** @return {@code metal:0}, the Apple GPU */
    public static Device metal() {
        return new Device(METAL, 0);
    }

    /**
     * Parses {@code kind} or {@code kind:index}, ignoring surrounding white space and the case of
     * the kind.
     *
     * @param text for example {@code cpu}, {@code cpu:1}, {@code cuda:0}, {@code rocm:2}, {@code metal}
     * @return the device
     * @throws InvalidMemoryRequestException if the text is null, empty or malformed
     */
    public static Device parse(String text) {
        if (text == null || text.isBlank()) {
            throw new InvalidMemoryRequestException("Invalid device '" + text
                    + "': expected kind or kind:index, for example cpu, cpu:1, cuda:0, metal");
        }
        String trimmed = text.strip();
        int colon = trimmed.indexOf(':');
        String kind = (colon < 0 ? trimmed : trimmed.substring(0, colon)).toLowerCase(Locale.ROOT);
        if (colon < 0) {
            return new Device(kind, 0);
        }
        String digits = trimmed.substring(colon + 1);
        if (digits.isEmpty() || digits.length() > 9 || !digits.chars().allMatch(c -> c >= '0' && c <= '9')) {
            throw new InvalidMemoryRequestException("Invalid device '" + text
                    + "': the part after ':' must be a device index such as 0 or 1");
        }
        return new Device(kind, Integer.parseInt(digits));
    }

    /** @return true for GPU kinds: {@value #CUDA}, {@value #ROCM} and {@value #METAL} */
    public boolean isGpu() {
        return CUDA.equals(kind) || ROCM.equals(kind) || METAL.equals(kind);
    }

    /** @return true for host memory ({@value #CPU}) */
    public boolean isCpu() {
        return CPU.equals(kind);
    }

    /** Orders by kind, then index: {@code cpu:0 < cpu:1 < cuda:0}. */
    @Override
    public int compareTo(Device other) {
        int byKind = kind.compareTo(Objects.requireNonNull(other, "other").kind);
        return byKind != 0 ? byKind : Integer.compare(index, other.index);
    }

    /** @return {@code kind:index}, accepted by {@link #parse(String)} */
    @Override
    public String toString() {
        return kind + ":" + index;
    }

    private static boolean isValidKind(String kind) {
        if (kind.isEmpty() || kind.length() > 32) {
            return false;
        }
        char first = kind.charAt(0);
        if (first < 'a' || first > 'z') {
            return false;
        }
        for (int i = 1; i < kind.length(); i++) {
            char c = kind.charAt(i);
            boolean ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
            if (!ok) {
                return false;
            }
        }
        return true;
    }
}
