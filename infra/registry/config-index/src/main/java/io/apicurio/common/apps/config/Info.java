package io.apicurio.common.apps.config;

import jakarta.enterprise.util.Nonbinding;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * The documentation annotation on the app's configuration fields, in its 3.0.9 shape (the
 * category is a {@link ConfigPropertyCategory}; 3.0.6, the version Central serves, has a string).
 */
@Documented
@Retention(RetentionPolicy.RUNTIME)
@Target({ ElementType.FIELD, ElementType.METHOD })
public @interface Info {

    @Nonbinding
    ConfigPropertyCategory category();

    @Nonbinding
    String description() default "";

    @Nonbinding
    String availableSince() default "";

    @Nonbinding
    String registryAvailableSince() default "";

    @Nonbinding
    String studioAvailableSince() default "";

    @Nonbinding
    String[] seeAlso() default {};

    @Nonbinding
    String[] dependsOn() default {};
}
