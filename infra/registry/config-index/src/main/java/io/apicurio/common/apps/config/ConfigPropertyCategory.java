package io.apicurio.common.apps.config;

/**
 * The categories the 3.0.9 app's {@link Info} annotations name. Central serves config-definitions
 * only at 3.0.6, which predates this enum; without it the app's bean metadata cannot be loaded.
 * Only the constant names matter: Tock never reads them.
 */
public enum ConfigPropertyCategory {
    CATEGORY_API,
    CATEGORY_AUTH,
    CATEGORY_CACHE,
    CATEGORY_CCOMPAT,
    CATEGORY_DOWNLOAD,
    CATEGORY_GITOPS,
    CATEGORY_HEALTH,
    CATEGORY_HIDDEN,
    CATEGORY_IMPORT,
    CATEGORY_LIMITS,
    CATEGORY_REDIRECTS,
    CATEGORY_REST,
    CATEGORY_SEMVER,
    CATEGORY_STORAGE,
    CATEGORY_SYSTEM,
    CATEGORY_UI
}
