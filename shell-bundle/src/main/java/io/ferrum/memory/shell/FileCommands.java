package io.ferrum.memory.shell;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.Locale;
import java.util.function.LongSupplier;
import java.util.function.Supplier;

import org.apache.felix.service.command.Descriptor;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.component.annotations.ReferenceCardinality;
import org.osgi.service.component.annotations.ReferencePolicy;
import org.osgi.service.component.annotations.ReferencePolicyOption;

import io.ferrum.memory.api.AllocationRequirements;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.GlobalMemoryMonitor;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryHandleInfo;
import io.ferrum.memory.api.MemoryRouter;
import io.ferrum.memory.api.MemoryType;

/**
 * The file commands: {@code mem:load} puts a file's bytes into a block (an existing one, or a new
 * one of the file's size: how model weights get onto a device) and {@code mem:save} writes a block
 * to a file. Both stream in chunks ({@link FileTransfer}), show progress only on a terminal ({@link
 * TransferProgress}), and answer one line saying what they did.
 *
 * <p>Invariants: every check that can fail before the first byte moves is made before it moves (the
 * file, by {@link FilePaths}; it fits the block), so a refused command changes nothing; a new block
 * of a load that fails later (or is interrupted: Ctrl-C) is freed again; a save writes a hidden temporary file beside the target
 * and renames it over the target only when every byte is written, so a failed save leaves no file
 * and an existing file unchanged. Relative paths are resolved against the framework's working
 * folder, and replies name the absolute path.
 */
@Component(service = FileCommands.class)
@MemCommand(function = {"load", "save"})
public final class FileCommands {

    @Reference(cardinality = ReferenceCardinality.OPTIONAL, policy = ReferencePolicy.DYNAMIC,
            policyOption = ReferencePolicyOption.GREEDY)
    volatile GlobalMemoryMonitor monitor;

    @Reference(cardinality = ReferenceCardinality.OPTIONAL, policy = ReferencePolicy.DYNAMIC,
            policyOption = ReferencePolicyOption.GREEDY)
    volatile MemoryRouter router;

    /** Where the progress line goes, or null for none; tests replace it. */
    Supplier<PrintStream> progressOutput = TransferProgress::terminal;
    /** The most bytes one chunk of a transfer moves; tests make it small. */
    int chunk = FileTransfer.CHUNK;
    /** Nanosecond time for progress and rates; tests replace it. */
    LongSupplier clock = System::nanoTime;

    private static final Syntax LOAD = Syntax.of("load").option("-d", "--device", "DEVICE").option("-t", "--type", "TYPE")
            .required("FILE").optional("HANDLE").optional("OFFSET");
    private static final Syntax SAVE = Syntax.of("save").required("HANDLE").required("FILE");

    @Descriptor("Load a file: mem:load [-d DEVICE] [-t TYPE] FILE [HANDLE [OFFSET]]. Without HANDLE into a new block"
            + " of the file's size, on DEVICE or where the router chooses, of TYPE (GENERAL by default); with HANDLE"
            + " into that block, from OFFSET (0 by default)")
    public Reply load(@Descriptor("[-d DEVICE] [-t TYPE] FILE [HANDLE [OFFSET]]") String... args) {
        return Reply.attempt("load", () -> {
            Syntax.Words w = LOAD.parse(args);
            // Null when not given: an empty value (--device= or --device $d with d = "") is a bad
            // value, refused by its parser as mem:alloc refuses it, not taken for none.
            String device = w.option("--device", null);
            String type = w.option("--type", null);
            String file = w.get("FILE");
            String handle = w.get("HANDLE", null);
            if (handle == null) {
                return loadNew(device, type, file);
            }
            if (device != null || type != null) {
                throw new InvalidMemoryRequestException("--device and --type are for a new block; with a handle the file"
                        + " goes into that block: drop them, or drop the handle");
            }
            MemoryHandle h = Arguments.handle(handle);
            long at = Sizes.parse("offset", w.get("OFFSET", "0"));
            MemoryRouter r = Services.router(router);
            MemoryHandleInfo block = BlockAccess.info(r, h);
            BlockAccess.clamp(h, block.size(), at, 0, "; nothing loaded");
            Path p = FilePaths.path(file);
            try (FileChannel in = FilePaths.openToLoad(file, p)) {
                long size = FilePaths.sizeOf(in, p);
                if (size > block.size() - at) {
                    throw new InvalidMemoryRequestException("File " + p + " (" + Sizes.count(size) + ") does not fit in"
                            + " block " + h + " at offset " + at + ": the block has " + Sizes.count(block.size()) + ", "
                            + (block.size() - at) + " of them from there; nothing loaded");
                }
                if (size == 0) {
                    // Checked as any load (the block, the offset, the file), then said, as mem:copy of 0 bytes says.
                    return Reply.line("Nothing to load: " + p + " is empty; " + h + " is unchanged");
                }
                return loaded(r, in, p, size, h, at, block.device(), false);
            }
        });
    }

    @Descriptor("Save a whole block to a file, replacing the file if it exists: mem:save HANDLE FILE")
    public Reply save(@Descriptor("HANDLE FILE") String... args) {
        return Reply.attempt("save", () -> {
            Syntax.Words w = SAVE.parse(args);
            MemoryHandle h = Arguments.handle(w.get("HANDLE"));
            String file = w.get("FILE");
            MemoryRouter r = Services.router(router);
            MemoryHandleInfo block = BlockAccess.info(r, h);
            Path p = FilePaths.path(file);
            Path target = FilePaths.saveTarget(file, p);
            Path tmp = FilePaths.openToSave(p, target);
            boolean saved = false;
            try {
                TransferProgress progress = new TransferProgress(progressOutput.get(), "saving", block.size(), clock);
                try (FileChannel out = FileChannel.open(tmp, StandardOpenOption.WRITE)) {
                    new FileTransfer(r, chunk).save(h, block.size(), out, progress);
                } finally {
                    progress.finish();
                }
                FilePaths.keepAttributes(target, tmp);
                Files.move(tmp, target, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
                saved = true;
                return Reply.line("saved " + Sizes.amount(block.size()) + " of " + h + " on " + block.device() + " to " + p
                        + " " + speed(block.size(), progress.elapsedNanos()));
            } catch (IOException e) {
                throw new InvalidMemoryRequestException("Cannot save to " + p + ": " + FilePaths.why(e) + "; nothing saved");
            } finally {
                if (!saved) {
                    Files.deleteIfExists(tmp);
                }
            }
        });
    }

    private Reply loadNew(String device, String type, String file) throws IOException, InterruptedException {
        MemoryRouter r = Services.router(router);
        MemoryType t = type == null ? MemoryType.GENERAL : Arguments.memoryType(type);
        Device d = device == null ? null : Device.parse(device);
        DeviceMemoryManager m = d == null ? null : Services.manager(monitor, d);
        Path p = FilePaths.path(file);
        try (FileChannel in = FilePaths.openToLoad(file, p)) {
            long size = FilePaths.sizeOf(in, p);
            if (size == 0) {
                throw new InvalidMemoryRequestException("File " + p + " is empty: there is nothing to load into a new"
                        + " block; nothing allocated");
            }
            MemoryHandle h = m == null ? r.allocate(size, AllocationRequirements.defaults().withMemoryType(t))
                    : m.allocate(size, t, d);
            try {
                Device on = d != null ? d : r.owner(h).orElse(null);
                return loaded(r, in, p, size, h, 0, on, true);
            } catch (RuntimeException | IOException | InterruptedException | Error e) {
                try {
                    r.deallocate(h);
                } catch (RuntimeException freeFailed) {
                    e.addSuppressed(freeFailed);
                }
                throw e;
            }
        }
    }

    private Reply loaded(MemoryRouter r, FileChannel in, Path p, long size, MemoryHandle h, long at, Device on,
                         boolean newBlock) throws IOException, InterruptedException {
        TransferProgress progress = new TransferProgress(progressOutput.get(), "loading", size, clock);
        // A new block is freed by the caller; an existing one keeps what arrived before a failure.
        String leftBehind = newBlock ? "; nothing loaded" : "; block " + h + " may hold part of it";
        try {
            new FileTransfer(r, chunk).load(in, p, size, h, at, progress, leftBehind);
        } catch (FileTransfer.Interrupted e) {
            // Ctrl-C: how far it got and what is left, as mem:fill says it; the interrupt stays set.
            throw new InterruptedException("interrupted: " + Sizes.amount(e.loaded) + " of the " + Sizes.count(size) + " of "
                    + p + " were loaded into " + (newBlock ? "a new block on " + on + ", which was freed; nothing loaded"
                    : h + " at offset " + at + "; the rest of the block is as it was"));
        } catch (IOException e) {
            throw new InvalidMemoryRequestException("Cannot read " + p + ": " + FilePaths.why(e) + leftBehind);
        } finally {
            progress.finish();
        }
        return Reply.line("loaded " + Sizes.amount(size) + " from " + p + " into " + (newBlock ? "new block " : "") + h + " on "
                + on + (newBlock ? "" : " at offset " + at) + " " + speed(size, progress.elapsedNanos()));
    }

    /** @return e.g. {@code in 6.2 ms (846.9 MB/s)} */
    private static String speed(long bytes, long nanos) {
        return String.format(Locale.ROOT, "in %.1f ms (%s)", nanos / 1e6, TransferProgress.rate(bytes, nanos));
    }
}
