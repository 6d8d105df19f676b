import java.io.File;
import java.util.ArrayList;
import java.util.List;
import org.teavm.diagnostics.Problem;
import org.teavm.diagnostics.ProblemSeverity;
import org.teavm.tooling.TeaVMTargetType;
import org.teavm.tooling.TeaVMTool;
import org.teavm.vm.TeaVMOptimizationLevel;

/**
 * Drives TeaVM: compiles the classes on CLASSPATH (javac output plus
 * TeaVM's class library) whose main class is MAIN into OUT, a WASI
 * preview-1 module. Prints TeaVM's problems and exits 1 on a severe one.
 *
 *   java -cp TEAVM_JARS:. Compile CLASSPATH MAIN OUT
 */
public class Compile {
    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: Compile CLASSPATH MAIN_CLASS OUT.wasm");
            System.exit(2);
        }
        TeaVMTool tool = new TeaVMTool();
        tool.setTargetType(TeaVMTargetType.WEBASSEMBLY_WASI);
        tool.setMainClass(args[1]);
        List<File> classPath = new ArrayList<>();
        for (String p : args[0].split(File.pathSeparator)) {
            classPath.add(new File(p));
        }
        tool.setClassPath(classPath);
        File out = new File(args[2]).getAbsoluteFile();
        tool.setTargetDirectory(out.getParentFile());
        tool.setTargetFileName(out.getName());
        tool.setOptimizationLevel(TeaVMOptimizationLevel.ADVANCED);
        tool.setObfuscated(true);
        tool.generate();
        boolean severe = false;
        for (Problem p : tool.getProblemProvider().getProblems()) {
            severe |= p.getSeverity() == ProblemSeverity.ERROR;
            String where = p.getLocation() != null && p.getLocation().getMethod() != null
                    ? " (in " + p.getLocation().getMethod() + ")" : "";
            System.err.println(p.getSeverity().name().toLowerCase() + ": " + render(p) + where);
        }
        if (severe || !out.isFile()) {
            System.exit(1);
        }
    }

    /** TeaVM's message with its {{m0}}-style placeholders filled in. */
    private static String render(Problem p) {
        String text = p.getText();
        Object[] params = p.getParams();
        for (int i = 0; params != null && i < params.length; i++) {
            text = text.replaceAll("\\{\\{[a-z]" + i + "\\}\\}",
                    java.util.regex.Matcher.quoteReplacement(String.valueOf(params[i])));
        }
        return text;
    }
}
