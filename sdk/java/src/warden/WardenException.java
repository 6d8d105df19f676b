package warden;

/**
 * A host function refused: {@link #code()} is the negative error code (the
 * same values as {@code WARDEN_E*} in {@code warden.h}), and the message
 * says what it means.
 */
public class WardenException extends RuntimeException {
    public static final int BAD_HANDLE = -1;
    public static final int REVOKED = -2;
    public static final int PEER_DIED = -3;
    public static final int NO_CLIENTS = -4;
    public static final int DENIED = -5;
    public static final int QUOTA = -6;
    public static final int NO_MEMORY = -7;
    public static final int BAD_POINTER = -8;
    public static final int TIMEOUT = -9;
    public static final int INVALID = -10;
    public static final int EXISTS = -11;
    public static final int DEADLOCK = -12;
    public static final int RANGE = -13;
    public static final int NO_REPLY = -14;
    public static final int BUSY = -16;
    public static final int IO = -17;
    public static final int NOT_SUPPORTED = -18;

    private final int code;

    public WardenException(int code) {
        this(code, describe(code));
    }

    public WardenException(int code, String message) {
        super(message);
        this.code = code;
    }

    /** The error code, negative. */
    public int code() {
        return code;
    }

    /** What an error code means (the text of {@code warden_strerror}). */
    public static String describe(int code) {
        switch (code) {
            case BAD_HANDLE: return "bad handle";
            case REVOKED: return "revoked";
            case PEER_DIED: return "peer died";
            case NO_CLIENTS: return "no clients";
            case DENIED: return "denied";
            case QUOTA: return "quota exceeded";
            case NO_MEMORY: return "out of memory";
            case BAD_POINTER: return "bad pointer";
            case TIMEOUT: return "timed out";
            case INVALID: return "invalid argument";
            case EXISTS: return "already exists";
            case DEADLOCK: return "would deadlock";
            case RANGE: return "out of range";
            case NO_REPLY: return "no reply";
            case BUSY: return "busy";
            case IO: return "I/O error";
            case NOT_SUPPORTED: return "not supported";
            default: return code >= 0 ? "success" : "unknown error";
        }
    }
}
