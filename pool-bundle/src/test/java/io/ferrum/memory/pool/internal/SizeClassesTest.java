package io.ferrum.memory.pool.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.TreeSet;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.MemoryPoolConfig;

/**
 * The size-class table: block sizes, class sizes and bins at the boundaries of each row, every
 * block size mapped to the smallest class that holds it, bins increasing with the class and
 * inside {@link SizeClasses#BINS}, and what is too large to round or to cache.
 */
class SizeClassesTest {
    static final long KiB = 1024;
    static final long MiB = 1024 * KiB;

    @Test
    void aPoolsUnitIsItsAlignmentButNeverBelowTheSmallestBlock() {
        assertEquals(256, SizeClasses.unit(MemoryPoolConfig.builder().alignment(256).build()));
        assertEquals(16, SizeClasses.unit(MemoryPoolConfig.builder().alignment(1).build()));
        assertEquals(16, SizeClasses.unit(MemoryPoolConfig.builder().alignment(16).build()));
    }

    @Test
    void blockSizesRoundUpToTheUnitAndTheSmallestBlock() {
        assertEquals(16, SizeClasses.blockSize(1, 16));
        assertEquals(16, SizeClasses.blockSize(16, 16));
        assertEquals(32, SizeClasses.blockSize(17, 16));
        assertEquals(256, SizeClasses.blockSize(1, 256));
        assertEquals(512, SizeClasses.blockSize(257, 256));
        assertEquals(4096, SizeClasses.blockSize(300, 4096));
        assertEquals(0, SizeClasses.alignUp(0, 64));
        assertEquals(64, SizeClasses.alignUp(1, 64));
        assertEquals(64, SizeClasses.alignUp(64, 64));
        assertEquals(128, SizeClasses.alignUp(65, 64));
    }

    @Test
    void theTablesRowsAtTheirBoundaries() {
        // Below 256 B a block is its own class.
        assertEquals(16, SizeClasses.classSize(16, 16));
        assertEquals(240, SizeClasses.classSize(240, 16));
        // 256..511: 16 B steps, so every block of the unit is a class.
        assertEquals(256, SizeClasses.classSize(256, 16));
        assertEquals(272, SizeClasses.classSize(272, 16));
        assertEquals(496, SizeClasses.classSize(496, 16));
        // 512..1023: 32 B steps.
        assertEquals(512, SizeClasses.classSize(512, 16));
        assertEquals(544, SizeClasses.classSize(528, 16));
        assertEquals(544, SizeClasses.classSize(544, 16));
        assertEquals(1024, SizeClasses.classSize(1008, 16));
        // 128..256 KiB: 8 KiB steps.
        assertEquals(136 * KiB, SizeClasses.classSize(128 * KiB + 16, 16));
        assertEquals(256 * KiB, SizeClasses.classSize(248 * KiB + 16, 16));
        assertEquals(SizeClasses.MAX_CLASS, SizeClasses.classSize(SizeClasses.MAX_CLASS, 16));
        // Above MAX_CLASS blocks keep their exact size.
        assertEquals(SizeClasses.MAX_CLASS + 16, SizeClasses.classSize(SizeClasses.MAX_CLASS + 16, 16));
        assertEquals(3 * MiB + 16, SizeClasses.classSize(3 * MiB + 16, 16));
        assertEquals(64 * MiB + 16, SizeClasses.classSize(64 * MiB + 16, 16), "out of the table: unchanged");
    }

    @Test
    void theStepIsNeverFinerThanTheUnit() {
        assertEquals(4096, SizeClasses.classSize(4096, 4096));
        assertEquals(8192, SizeClasses.classSize(8192, 4096), "8 KiB / 16 = 512 B steps, but the unit is 4 KiB");
        assertEquals(12 * KiB, SizeClasses.classSize(12 * KiB, 4096));
        assertEquals(16 * KiB, SizeClasses.classSize(16 * KiB, 4096));
        assertEquals(1024, SizeClasses.classSize(1024, 256));
        assertEquals(1280, SizeClasses.classSize(1280, 256), "64 B steps at 1 KiB, but the unit is 256 B");
    }

    @Test
    void everyBlockSizeMapsToTheSmallestClassThatHoldsIt() {
        for (long unit : new long[] {16, 256, 4096}) {
            TreeSet<Long> classes = new TreeSet<>();
            long previous = 0;
            for (long b = unit; b <= SizeClasses.MAX_CLASS; b += unit) {
                long c = SizeClasses.classSize(b, unit);
                assertTrue(c >= b, "class " + c + " of " + b);
                assertTrue(c >= previous, "classes never go down: " + b);
                assertEquals(c, SizeClasses.classSize(c, unit), "a class is its own class: " + c);
                assertEquals(0, c % unit, "a class is a block size of the unit");
                classes.add(c);
                previous = c;
            }
            for (long b = unit; b <= SizeClasses.MAX_CLASS; b += unit) {
                assertEquals(classes.ceiling(b), SizeClasses.classSize(b, unit), "unit " + unit + ", block " + b);
            }
            // No class wastes more than a sixteenth of a power of two (or the unit) on what it holds.
            for (long b = 256; b <= SizeClasses.MAX_CLASS; b += unit) {
                long c = SizeClasses.classSize(b, unit);
                assertTrue(c - b < Math.max(unit, Long.highestOneBit(b) >>> 4), b + " -> " + c);
            }
        }
    }

    @Test
    void binsAtTheTablesBoundaries() {
        assertEquals(1, SizeClasses.bin(16));
        assertEquals(15, SizeClasses.bin(240));
        assertEquals(16, SizeClasses.bin(256));
        assertEquals(31, SizeClasses.bin(496));
        assertEquals(32, SizeClasses.bin(512));
        assertEquals(47, SizeClasses.bin(992));
        assertEquals(160, SizeClasses.bin(128 * KiB));
        assertEquals(175, SizeClasses.bin(248 * KiB));
        assertEquals(176, SizeClasses.bin(SizeClasses.MAX_CLASS));
        assertEquals(SizeClasses.BINS - 1, SizeClasses.bin(SizeClasses.MAX_BLOCK));
        assertEquals(241, SizeClasses.BINS);
    }

    @Test
    void distinctClassesHaveDistinctIncreasingBins() {
        int previous = 0;
        long previousClass = 0;
        for (long b = 16; b <= SizeClasses.MAX_CLASS; b += 16) {
            long c = SizeClasses.classSize(b, 16);
            int bin = SizeClasses.bin(c);
            if (c != previousClass) {
                assertTrue(bin > previous, "class " + c + " has bin " + bin + ", after " + previous);
            } else {
                assertEquals(previous, bin);
            }
            previous = bin;
            previousClass = c;
        }
    }

    @Test
    void aboveMaxClassABinHoldsEverySizeFromItsClassToTheNext() {
        // 256 KiB..4 MiB: a sixteenth of the power of two per bin, e.g. 1 MiB..1 MiB + 64 KiB.
        int bin = SizeClasses.bin(MiB);
        assertEquals(bin, SizeClasses.bin(MiB + 16));
        assertEquals(bin, SizeClasses.bin(MiB + 64 * KiB - 16));
        assertEquals(bin + 1, SizeClasses.bin(MiB + 64 * KiB));
        assertEquals(bin - 1, SizeClasses.bin(MiB - 16));
        for (long size = SizeClasses.MAX_CLASS; size <= SizeClasses.MAX_BLOCK; size += 4 * KiB) {
            int k = SizeClasses.bin(size);
            assertTrue(k < SizeClasses.BINS, size + " -> " + k);
            assertTrue(k >= SizeClasses.bin(size - 4 * KiB));
        }
    }

    @Test
    void onlyBlocksUpToMaxClassAreCachedAlwaysAndNothingAboveMaxBlock() {
        assertTrue(SizeClasses.cacheable(16, false));
        assertTrue(SizeClasses.cacheable(SizeClasses.MAX_CLASS, false));
        assertFalse(SizeClasses.cacheable(SizeClasses.MAX_CLASS + 16, false));
        assertTrue(SizeClasses.cacheable(SizeClasses.MAX_CLASS + 16, true));
        assertTrue(SizeClasses.cacheable(SizeClasses.MAX_BLOCK, true));
        assertFalse(SizeClasses.cacheable(SizeClasses.MAX_BLOCK + 16, true));
        assertFalse(SizeClasses.cacheable(SizeClasses.MAX_BLOCK + 16, false));
    }
}
