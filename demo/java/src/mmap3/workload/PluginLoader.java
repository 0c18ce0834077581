package mmap3.workload;

import java.io.IOException;
import java.io.InputStream;

/**
 * Defines PluginImpl itself from the class file bytes on the class path, instead of delegating
 * to the parent (which could load it too), so that the class belongs to this loader and is
 * unloaded with it. Everything else, Task and java.*, comes from the parent.
 */
final class PluginLoader extends ClassLoader {
    static final String PLUGIN = "mmap3.workload.PluginImpl";

    PluginLoader(ClassLoader parent) {
        super("mmap3-plugin", parent);
    }

    @Override
    protected Class<?> loadClass(String name, boolean resolve) throws ClassNotFoundException {
        if (!name.equals(PLUGIN)) {
            return super.loadClass(name, resolve);
        }
        synchronized (getClassLoadingLock(name)) {
            Class<?> c = findLoadedClass(name);
            if (c == null) {
                byte[] bytes;
                String resource = PLUGIN.replace('.', '/') + ".class";
                try (InputStream in = getParent().getResourceAsStream(resource)) {
                    if (in == null) {
                        throw new ClassNotFoundException(name + ": no " + resource);
                    }
                    bytes = in.readAllBytes();
                } catch (IOException e) {
                    throw new ClassNotFoundException(name, e);
                }
                c = defineClass(name, bytes, 0, bytes.length);
            }
            if (resolve) {
                resolveClass(c);
            }
            return c;
        }
    }
}
