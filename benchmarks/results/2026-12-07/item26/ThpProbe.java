import java.lang.foreign.*;
import java.lang.invoke.*;
import java.nio.file.*;
public class ThpProbe {
  public static void main(String[] a) throws Throwable {
    Linker L = Linker.nativeLinker(); SymbolLookup C = L.defaultLookup();
    MethodHandle pm = L.downcallHandle(C.find("posix_memalign").get(), FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG));
    MethodHandle mad = L.downcallHandle(C.find("madvise").get(), FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT), Linker.Option.captureCallState("errno"));
    long n = 256L<<20;
    try (Arena ar = Arena.ofConfined()) {
      MemorySegment out = ar.allocate(ValueLayout.ADDRESS);
      int rc = (int) pm.invokeExact(out, 2L<<20, n);
      MemorySegment p = out.get(ValueLayout.ADDRESS, 0).reinterpret(n);
      MemorySegment st = ar.allocate(Linker.Option.captureStateLayout());
      int r2 = (int) mad.invokeExact(st, p, n, Integer.parseInt(a[0]));
      System.out.println("pm " + rc + " addr " + Long.toHexString(p.address()) + " madvise " + r2 + " errno " + st.get(ValueLayout.JAVA_INT, 0));
      long t0=System.nanoTime();
      for (long o = 0; o < n; o += 4096) p.set(ValueLayout.JAVA_BYTE, o, (byte)1);
      long t1=System.nanoTime();
      for (int k=0;k<10;k++) for (long o = 0; o < n; o += 4096) p.set(ValueLayout.JAVA_BYTE, o, (byte)2);
      long t2=System.nanoTime();
      System.out.println("first touch ms " + (t1-t0)/1e6 + " 10 more touches ns/page " + (t2-t1)/10.0/(n/4096));
      for (String l : Files.readAllLines(Path.of("/proc/self/smaps_rollup"))) if (l.contains("AnonHuge")) System.out.println(l);
    }
  }
}
