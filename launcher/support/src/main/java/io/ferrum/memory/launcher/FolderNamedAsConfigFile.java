package io.ferrum.memory.launcher;

import java.io.File;

import org.apache.felix.fileinstall.ArtifactInstaller;
import org.osgi.framework.BundleContext;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.log.Logger;
import org.osgi.service.log.LoggerFactory;

/**
 * Says why a folder in a watched folder named as a configuration file ({@code
 * config/io.ferrum.memory.cpu.device-t1.cfg/}, a file replaced by a folder, a copy gone wrong)
 * configures nothing. FileInstall packs such a folder into a jar of its own temporary folder
 * ({@code tmp/io.ferrum.memory.cpu.device-t1.cfg.jar} in the distribution, {@code felix.fileinstall.tmpdir})
 * and asks its installers about that
 * jar, which none takes: it says nothing at any log level. This installer claims exactly those jars,
 * and logs one error line for each version of the folder (FileInstall then installs the folder's own
 * path); a file saved in its place is applied ({@link ClaimingInstaller}).
 */
@Component(service = ArtifactInstaller.class)
public final class FolderNamedAsConfigFile extends ClaimingInstaller {
    private final Logger log;

    @Activate
    public FolderNamedAsConfigFile(BundleContext context, @Reference(service = LoggerFactory.class) Logger log) {
        super(WatchedFolders.of(context));
        this.log = log;
    }

    @Override
    void error(String line) {
        log.error("{}", line);
    }

    @Override
    public boolean canHandle(File artifact) {
        return packedFolders(artifact, watched).stream().anyMatch(f -> ConfigFileEntries.isConfigName(f.getName()));
    }

    /** @param folder the folder itself: FileInstall asks about its jar, and installs the path it watches */
    @Override
    void report(File folder) {
        if (folder.isDirectory()) {
            log.error("{} is a folder: FileInstall makes configurations of files only, so it configures nothing; put the"
                    + " configuration in a file of that name", ControlCharacters.escaped(folder.getAbsolutePath()));
        }
    }
}
