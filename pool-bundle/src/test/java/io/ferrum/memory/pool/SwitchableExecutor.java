package io.ferrum.memory.pool;

import java.util.List;
import java.util.concurrent.AbstractExecutorService;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A stream manager's thread pool for tests: runs work on real daemon threads until told to refuse
 * ({@link #reject}), as a shut-down executor, or one out of threads, does.
 */
final class SwitchableExecutor extends AbstractExecutorService {
    final ExecutorService delegate = Executors.newCachedThreadPool(r -> {
        Thread t = new Thread(r, "test-stream");
        t.setDaemon(true);
        return t;
    });
    final AtomicBoolean reject = new AtomicBoolean();

    @Override
    public void execute(Runnable command) {
        if (reject.get()) {
            throw new RejectedExecutionException("test executor rejects");
        }
        delegate.execute(command);
    }

    @Override
    public void shutdown() {
        delegate.shutdown();
    }

    @Override
    public List<Runnable> shutdownNow() {
        return delegate.shutdownNow();
    }

    @Override
    public boolean isShutdown() {
        return delegate.isShutdown();
    }

    @Override
    public boolean isTerminated() {
        return delegate.isTerminated();
    }

    @Override
    public boolean awaitTermination(long timeout, TimeUnit unit) throws InterruptedException {
        return delegate.awaitTermination(timeout, unit);
    }
}
