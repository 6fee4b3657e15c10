package io.ferrum.memory.api;

import java.io.Serial;

/**
 * A call on a block that a mapping through a host staging copy excludes. On memory the CPU cannot
 * address (a GPU's), {@link AdvancedMemoryManager#mapMemory} makes a host copy of the block, and
 * the views show that copy until {@link AdvancedMemoryManager#unmapMemory} writes it back. While
 * such a mapping exists (from the start of its copy to the end of its write-back), the block's other
 * data paths ({@code read}, {@code write} and their asynchronous forms, {@code withMapped}, {@code
 * copy}, {@code copyAsync} and {@code copyToPeer} on either side) would read bytes older than the
 * views' or write bytes the write-back would overwrite: they are refused with this exception. So is
 * a {@code mapMemory} that would start such a mapping while one of those calls on the block is under
 * way (an asynchronous copy counts until it has run): its copy would miss their bytes. The later of
 * the two is refused; nothing was changed by the refused call, which may be made again once the other
 * has returned. Of two calls that start at the same moment on two threads, one goes on; both can be
 * refused only when the thread of the one refused first is descheduled for more than a few
 * microseconds before it lets go of the block. A {@code withMapped} action on such memory holds the
 * block the same way, from before its own staging copy is made to the end of its write-back: every
 * other thread's call on the block, and every copy with it on either side, is refused meanwhile; the
 * action's own thread's nested calls share its copy. READ_ONLY actions of several threads share a
 * block instead: other threads' {@code read}s and READ_ONLY actions go on, their writes are refused,
 * and so is a writer nested in one of them while another thread's shares it. Host memory is never
 * staged, and never refused so.
 *
 * @since 1.5
 */
public class StagingConflictException extends MemoryException {
    @Serial
    private static final long serialVersionUID = 1L;

    private final MemoryHandle handle;

    /**
     * @param handle  the block's handle given to the refused call
     * @param message which block, which device, and what to do (unmap it first, or wait for the call under way)
     */
    public StagingConflictException(MemoryHandle handle, String message) {
        super(message);
        this.handle = handle;
    }

    /** @return the handle of the block whose staging copy the refused call conflicted with */
    public MemoryHandle handle() {
        return handle;
    }
}
