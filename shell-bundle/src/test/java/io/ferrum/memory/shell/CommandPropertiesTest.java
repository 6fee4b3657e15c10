package io.ferrum.memory.shell;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;

import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;

import org.junit.jupiter.api.Test;

/** What Gogo will offer: the {@link MemCommand} of every command class against its public methods. */
class CommandPropertiesTest {
    private static final List<Class<?>> COMMANDS = List.of(DeviceCommands.class, AllocationCommands.class,
            BytesCommands.class, FileCommands.class, StrategyCommands.class, MaintenanceCommands.class, BackendCommands.class);

    @Test
    void everyCommandClassIsInScopeMemAndNamesExactlyItsPublicCommands() {
        Set<String> all = new TreeSet<>();
        for (Class<?> type : COMMANDS) {
            MemCommand command = type.getAnnotation(MemCommand.class);
            assertNotNull(command, type.getSimpleName());
            assertEquals("mem", command.scope(), type.getSimpleName());
            Set<String> named = new TreeSet<>(List.of(command.function()));
            Set<String> methods = new TreeSet<>(Arrays.stream(type.getDeclaredMethods())
                    .filter(m -> Modifier.isPublic(m.getModifiers()) && m.getReturnType() == Reply.class)
                    .map(Method::getName).toList());
            assertEquals(methods, named, type.getSimpleName());
            all.addAll(named);
        }
        assertEquals(22, all.size(), "the 22 mem:* commands, each with one home: " + all);
    }
}
