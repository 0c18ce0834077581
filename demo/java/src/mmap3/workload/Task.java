package mmap3.workload;

/**
 * What the plugin implements. Loaded by the application class loader and shared with the
 * plugin's loader; public because PluginImpl is in another runtime package (other loader).
 */
public interface Task {
    long work(int n);
}
